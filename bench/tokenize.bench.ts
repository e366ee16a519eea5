/**
 * Cost of loss-masked SFT tokenization against the tokenizer alone, per preset tokenizer: the
 * tokenizer's raw encode of already-rendered conversations versus tokenizeConversation end to end
 * on the same conversations (render, span location on the full rendering with marker renders and
 * served-prompt renders, whole-text encode, piecewise encode at span boundaries, decode check).
 * Prints tokens/s for both and their ratio (raw / end to end: how many times slower masking is).
 * Prints figures, never asserts on time.
 *
 *   npx tsc -p tsconfig.build.json && node dist/bench/tokenize.bench.js [--seconds 2] [--train-on all|last]
 */
import { sampleConversations } from '../shared/text/__fixtures__/sample-conversations';
import type { ChatTokenizer } from '../shared/text/chat-tokenizer';
import { loadChatTokenizer, tokenizerPresets, type TokenizerPreset } from '../shared/text/load-chat-tokenizer';
import { trajectoryToTemplateInput } from '../shared/text/template-input';
import { tokenizeConversation } from '../shared/text/tokenize-conversation';

function argument(name: string): string | undefined {
  const index = process.argv.indexOf(`--${name}`);
  return index === -1 ? undefined : process.argv[index + 1];
}

const seconds = Number(argument('seconds') ?? 2);
const trainOn = argument('train-on') === 'last' ? 'last' : 'all';
const now = new Date(Date.UTC(2025, 0, 1));

/** Runs `round` (which returns the tokens it produced) repeatedly for about `budget` seconds. */
function tokensPerSecond(round: () => number, budget: number): number {
  for (let warm = 0; warm < 3; warm++) round();
  let tokens = 0;
  const start = process.hrtime.bigint();
  let elapsed = 0;
  while (elapsed < budget) {
    tokens += round();
    elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  }
  return tokens / elapsed;
}

function format(value: number): string {
  return Math.round(value).toLocaleString('en-US').padStart(10);
}

async function measure(preset: TokenizerPreset): Promise<Record<string, unknown>> {
  const tokenizer: ChatTokenizer = await loadChatTokenizer({ preset });
  // Only conversations this template accepts, so both sides tokenize the same texts.
  const accepted = sampleConversations.filter((conversation) => tokenizeConversation(tokenizer, conversation.messages, conversation.tools, { trainOn, now }).ok);
  const texts = accepted.map((conversation) => {
    const input = trajectoryToTemplateInput(conversation.messages, conversation.tools, tokenizer.templateFeatures);
    return tokenizer.render(input.messages, { tools: input.tools, now });
  });
  const raw = tokensPerSecond(() => texts.reduce((sum, text) => sum + tokenizer.encode(text).length, 0), seconds);
  const endToEnd = tokensPerSecond(
    () => accepted.reduce((sum, conversation) => {
      const result = tokenizeConversation(tokenizer, conversation.messages, conversation.tools, { trainOn, now });
      return sum + (result.ok ? result.sample.inputIds.length : 0);
    }, 0),
    seconds,
  );
  console.log(`${preset.padEnd(12)} ${String(accepted.length).padStart(13)} ${format(raw)} ${format(endToEnd)} ${(raw / endToEnd).toFixed(2).padStart(7)}`);
  return { preset, conversations: accepted.length, rawTokensPerSecond: Math.round(raw), endToEndTokensPerSecond: Math.round(endToEnd), ratio: Number((raw / endToEnd).toFixed(2)) };
}

async function main(): Promise<void> {
  console.log(`tokenize bench: trainOn=${trainOn}, ${seconds}s per measurement`);
  console.log(`${'preset'.padEnd(12)} ${'conversations'} ${'raw tok/s'.padStart(10)} ${'e2e tok/s'.padStart(10)} ${'ratio'.padStart(7)}`);
  const results = [];
  for (const preset of Object.keys(tokenizerPresets) as TokenizerPreset[]) results.push(await measure(preset));
  console.log(JSON.stringify({ bench: 'tokenize', trainOn, results }));
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
