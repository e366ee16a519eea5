/**
 * Cost of loss-masked SFT tokenization against the tokenizer alone, per preset tokenizer: the
 * tokenizer's raw encode of already-rendered conversations versus tokenizeConversation end to end
 * on the same conversations (render, span location on the full rendering with marker renders and
 * served-prompt renders, whole-text encode, piecewise encode at span boundaries, decode check).
 * Prints tokens/s for both and their ratio (raw / end to end: how many times slower masking is).
 * Prints figures, never asserts on time.
 *
 *   make build-dev && node dist/bench/tokenize.bench.js [--seconds 2] [--train-on all|last]
 * (from the repository root: the Qwen3.5 rows read its template from shared/text/__fixtures__).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { sampleConversations } from '../shared/text/__fixtures__/sample-conversations';
import type { ChatTokenizer } from '../shared/text/chat-tokenizer';
import {
  loadChatTokenizer,
  tokenizerPresets,
  type ChatTokenizerSource,
  type TokenizerPreset,
} from '../shared/text/load-chat-tokenizer';
import { trajectoryToTemplateInput } from '../shared/text/template-input';
import { tokenizeConversation, type TokenizeOptions } from '../shared/text/tokenize-conversation';
import { checkBenchFlags } from './bench-flags';

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

async function measure(
  label: string,
  source: ChatTokenizerSource,
  enableThinking?: boolean,
): Promise<Record<string, unknown>> {
  const tokenizer: ChatTokenizer = await loadChatTokenizer(source);
  const options: TokenizeOptions = { trainOn, now, ...(enableThinking === undefined ? {} : { enableThinking }) };
  // Only conversations this template accepts, so both sides tokenize the same texts.
  const accepted = sampleConversations.filter(
    (conversation) => tokenizeConversation(tokenizer, conversation.messages, conversation.tools, options).ok,
  );
  const texts = accepted.map((conversation) => {
    const input = trajectoryToTemplateInput(conversation.messages, conversation.tools, tokenizer.templateFeatures);
    return tokenizer.render(input.messages, {
      tools: input.tools,
      now,
      ...(enableThinking === undefined ? {} : { enableThinking }),
    });
  });
  const raw = tokensPerSecond(() => texts.reduce((sum, text) => sum + tokenizer.encode(text).length, 0), seconds);
  const endToEnd = tokensPerSecond(
    () =>
      accepted.reduce((sum, conversation) => {
        const result = tokenizeConversation(tokenizer, conversation.messages, conversation.tools, options);
        return sum + (result.ok ? result.sample.inputIds.length : 0);
      }, 0),
    seconds,
  );
  console.log(
    `${label.padEnd(20)} ${String(accepted.length).padStart(13)} ${format(raw)} ${format(endToEnd)} ${(raw / endToEnd).toFixed(2).padStart(7)}`,
  );
  return {
    preset: label,
    conversations: accepted.length,
    rawTokensPerSecond: Math.round(raw),
    endToEndTokensPerSecond: Math.round(endToEnd),
    ratio: Number((raw / endToEnd).toFixed(2)),
  };
}

async function main(): Promise<void> {
  checkBenchFlags('node dist/bench/tokenize.bench.js [--seconds 2] [--train-on all|last]');
  console.log(`tokenize bench: trainOn=${trainOn}, ${seconds}s per measurement`);
  console.log(
    `${'preset'.padEnd(20)} ${'conversations'} ${'raw tok/s'.padStart(10)} ${'e2e tok/s'.padStart(10)} ${'ratio'.padStart(7)}`,
  );
  const results = [];
  for (const preset of Object.keys(tokenizerPresets) as TokenizerPreset[])
    results.push(await measure(preset, { preset }));
  // Qwen3.5's template on the Qwen3 tokenizer (run from the repository root): thinking mode adds
  // the merged-token check (two more encodes per span whose start falls inside a token).
  const qwen35 = readFileSync(path.resolve('shared/text/__fixtures__/chat-templates/Qwen3.5-4B.jinja'), 'utf8');
  results.push(await measure('qwen3.5 thinking', { preset: 'qwen3', chatTemplate: qwen35 }));
  results.push(await measure('qwen3.5 no thinking', { preset: 'qwen3', chatTemplate: qwen35 }, false));
  console.log(JSON.stringify({ bench: 'tokenize', trainOn, results }));
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
