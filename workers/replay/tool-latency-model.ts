import { z } from 'zod';
import type { Rng } from '../../shared/random/rng';

/** z of the 95th percentile of a standard normal. */
const z95 = 1.6448536269514722;

const lognormalSchema = z
  .object({
    /** Median tool duration, ms. */
    p50Ms: z.number().positive(),
    /** 95th percentile, ms (>= p50Ms; equal gives a constant). */
    p95Ms: z.number().positive(),
  })
  .strict()
  .refine((latency) => latency.p95Ms >= latency.p50Ms, { message: 'p95Ms must be >= p50Ms', path: ['p95Ms'] });
export type ToolLatency = z.infer<typeof lognormalSchema>;

/**
 * Default latency of a tool the config does not name: our assumption for a live-commerce backend
 * call (item detail, stock, coupon lookup) in the same region, not a measurement. Replace it with
 * production figures per tool when you have them.
 */
export const defaultToolLatency: ToolLatency = { p50Ms: 200, p95Ms: 800 };

/**
 * Tool latency model of a replay: the think time after a model call that asked for tools. The
 * simulator's tools answer in microseconds, so sessions recorded there would replay with almost
 * no think time; the model draws each tool's duration from a lognormal fitted to a p50 and a p95
 * (tools of one call run side by side: the call waits for the slowest).
 */
export const toolLatencySchema = z
  .object({
    /** Which sessions get modelled tool times: `simulator` (collect trajectories; production traces keep theirs), `all`, or `none`. Default simulator. */
    apply: z.enum(['simulator', 'all', 'none']).default('simulator'),
    /** Latency of tools not named in `tools`. Default p50 200 ms, p95 800 ms. */
    default: lognormalSchema.default(defaultToolLatency),
    /** Latency per tool name. */
    tools: z.record(z.string().min(1), lognormalSchema).default({}),
  })
  .strict();
export type ToolLatencyConfig = z.infer<typeof toolLatencySchema>;

/** Draws think times for one session; the same seed gives the same times. */
export type ToolThinkTime = (toolNames: readonly string[], callIndex: number) => number;

/** The lognormal quantile function's parameters from p50 and p95. */
function lognormalOf(latency: ToolLatency): { mu: number; sigma: number } {
  return { mu: Math.log(latency.p50Ms), sigma: (Math.log(latency.p95Ms) - Math.log(latency.p50Ms)) / z95 };
}

/**
 * The think-time function of a session, or undefined when its recorded tool times stand. Draws
 * come from `rng` forked by call index and tool position, so a call's think time does not depend
 * on which other sessions ran or in which order.
 */
export function toolThinkTimeFor(
  config: ToolLatencyConfig,
  session: { simulator: boolean },
  rng: Rng,
): ToolThinkTime | undefined {
  if (config.apply === 'none' || (config.apply === 'simulator' && !session.simulator)) return undefined;
  const parameters = new Map<string, { mu: number; sigma: number }>();
  const parametersOf = (name: string) => {
    let found = parameters.get(name);
    if (!found) {
      found = lognormalOf(config.tools[name] ?? config.default);
      parameters.set(name, found);
    }
    return found;
  };
  return (toolNames, callIndex) => {
    let slowest = 0;
    toolNames.forEach((name, position) => {
      const { mu, sigma } = parametersOf(name);
      const draw = Math.exp(mu + sigma * rng.fork(`${callIndex}/${position}`).normal());
      slowest = Math.max(slowest, draw);
    });
    return slowest;
  };
}
