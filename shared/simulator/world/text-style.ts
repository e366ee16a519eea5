/**
 * How much text a generated world and its viewers carry. `default` is the simulator's own short
 * text (what every generated task set so far holds); `cjk-heavy` is production-log-like: the
 * same rooms, prices, SKUs and intents for the same seed, with Taobao-style long keyword titles,
 * long spec values and selling points, campaign scripts of several sentences, long after-sales
 * notes and viewer comments of several clauses with particles and emoji.
 */
export const textStyles = ['default', 'cjk-heavy'] as const;
export type TextStyle = (typeof textStyles)[number];
