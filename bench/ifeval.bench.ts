/**
 * IFEval checking throughput against JSON-parsing the same responses: GPT-4's 540 IFEval
 * responses (the faithfulness fixture) are (a) parsed from their JSONL lines, the baseline, and
 * (b) parsed and checked with every instruction of their prompt, strict and loose (up to eight
 * variants each), then (c) checked strict only. Prints responses/s and how many times slower
 * checking is than parsing, all measured in the same run. Model loading (the language profiles,
 * the Punkt parameters) happens once before timing and is printed apart. Never asserts on time.
 *
 *   make build-dev && node dist/bench/ifeval.bench.js [--seconds 3]
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  checkIfevalResponse,
  checkInstruction,
  detectLanguage,
  countSentences,
  loadIfevalItems,
} from '../shared/eval/ifeval';
import { checkBenchFlags } from './bench-flags';

function argument(name: string): string | undefined {
  const index = process.argv.indexOf(`--${name}`);
  return index === -1 ? undefined : process.argv[index + 1];
}

const seconds = Number(argument('seconds') ?? 3);

/** The fixture lives beside the sources; dist/ has no copy, so look from both. */
function fixturePath(): string {
  const candidates = ['..', '../..'].map((up) =>
    join(__dirname, up, 'shared', 'eval', 'ifeval', '__fixtures__', 'gpt4-reference-results.jsonl'),
  );
  const found = candidates.find((candidate) => existsSync(candidate));
  if (!found) throw new Error(`ifeval bench: fixture not found (looked at ${candidates.join(', ')})`);
  return found;
}

/** Runs `round` (which returns the responses it handled) repeatedly for about `budget` seconds. */
function perSecond(round: () => number, budget: number): number {
  for (let warm = 0; warm < 2; warm++) round();
  let handled = 0;
  const start = process.hrtime.bigint();
  let elapsed = 0;
  while (elapsed < budget) {
    handled += round();
    elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  }
  return handled / elapsed;
}

function main(): void {
  checkBenchFlags('node dist/bench/ifeval.bench.js [--seconds 3]');
  const loadStart = process.hrtime.bigint();
  const items = new Map(loadIfevalItems().map((item) => [item.key, item]));
  detectLanguage('warm up the language profiles');
  countSentences('Warm up Punkt. Done.');
  const loadMs = Number(process.hrtime.bigint() - loadStart) / 1e6;

  const lines = readFileSync(fixturePath(), 'utf8').trim().split('\n');
  const parse = (line: string) => JSON.parse(line) as { key: number; response: string };
  const instructions = lines.reduce((sum, line) => sum + items.get(parse(line).key)!.instructionIds.length, 0);

  const parsed = perSecond(() => {
    let count = 0;
    for (const line of lines) count += parse(line).response.length > -1 ? 1 : 0;
    return count;
  }, seconds);
  const checkedBoth = perSecond(() => {
    for (const line of lines) {
      const record = parse(line);
      checkIfevalResponse(items.get(record.key)!, record.response);
    }
    return lines.length;
  }, seconds);
  const checkedStrict = perSecond(() => {
    for (const line of lines) {
      const record = parse(line);
      const item = items.get(record.key)!;
      item.instructionIds.forEach((id, index) =>
        checkInstruction(id, item.kwargs[index], item.prompt, record.response, 'strict'),
      );
    }
    return lines.length;
  }, seconds);

  const rate = (value: number) => Math.round(value).toLocaleString('en-US').padStart(12);
  console.log(
    `ifeval bench: ${lines.length} responses, ${instructions} instructions, ${seconds}s per measurement, one-off load ${loadMs.toFixed(0)} ms`,
  );
  console.log(`${'JSON.parse only (baseline)'.padEnd(34)} ${rate(parsed)} responses/s`);
  console.log(
    `${'parse + check strict and loose'.padEnd(34)} ${rate(checkedBoth)} responses/s  ${(parsed / checkedBoth).toFixed(0)}x slower than parsing`,
  );
  console.log(
    `${'parse + check strict only'.padEnd(34)} ${rate(checkedStrict)} responses/s  ${(parsed / checkedStrict).toFixed(0)}x slower than parsing`,
  );
  console.log(
    JSON.stringify({
      bench: 'ifeval',
      responses: lines.length,
      instructions,
      loadMs: Math.round(loadMs),
      parsePerSecond: Math.round(parsed),
      checkStrictAndLoosePerSecond: Math.round(checkedBoth),
      checkStrictPerSecond: Math.round(checkedStrict),
      slowdownStrictAndLoose: Number((parsed / checkedBoth).toFixed(1)),
      slowdownStrict: Number((parsed / checkedStrict).toFixed(1)),
    }),
  );
}

main();
