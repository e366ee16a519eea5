import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { normalizePromptText } from '../../../workers/eval/contamination';
import { builtinPromptsDirectory } from '../../../workers/distill/prompt-sources';
import { loadIfevalItems } from '.';

/**
 * The shipped distillation prompt set (examples/prompts/) must not contain IFEval prompts, or a
 * model distilled on it would be scored on its training data. Checked three ways: the eval
 * stage's contamination rule (equal normalized text), containment either way, and any shared run
 * of 8 normalized words (a lightly edited copy). IFEval-style constraint phrasings alone
 * ("end with a postscript starting with P.S.") are shorter than that and allowed.
 */
const runLength = 8;

function userText(record: Record<string, unknown>): string {
  if (typeof record.prompt === 'string') return record.prompt;
  const messages = (record.messages ?? []) as Array<{ role: string; content: unknown }>;
  return messages
    .filter((message) => message.role === 'user' && typeof message.content === 'string')
    .map((message) => message.content as string)
    .join('\n');
}

function wordRuns(normalized: string): Set<string> {
  const words = normalized.split(' ').filter(Boolean);
  const runs = new Set<string>();
  for (let start = 0; start + runLength <= words.length; start += 1)
    runs.add(words.slice(start, start + runLength).join(' '));
  return runs;
}

const ifevalTexts = loadIfevalItems().map((item) => normalizePromptText(item.prompt));
const ifevalExact = new Set(ifevalTexts);
const ifevalRuns = new Set(ifevalTexts.flatMap((text) => [...wordRuns(text)]));

function overlaps(prompt: string): string | undefined {
  const normalized = normalizePromptText(prompt);
  if (ifevalExact.has(normalized)) return 'same normalized text as an IFEval prompt';
  if (ifevalTexts.some((text) => text.includes(normalized) || normalized.includes(text)))
    return 'contains or is contained in an IFEval prompt';
  const shared = [...wordRuns(normalized)].find((run) => ifevalRuns.has(run));
  return shared ? `shares "${shared}" with an IFEval prompt` : undefined;
}

describe('shipped distillation prompts vs IFEval', () => {
  it('finds a lightly edited IFEval prompt (the check can fail)', () => {
    const ifevalPrompt = loadIfevalItems()[0].prompt;
    expect(overlaps(ifevalPrompt.toUpperCase().replace(/,/g, ' ;'))).toBeDefined();
    expect(overlaps(`Please answer: ${ifevalPrompt.slice(0, 80)}`)).toBeDefined();
  });

  it('examples/prompts/*.jsonl has no prompt overlapping IFEval', () => {
    const directory = builtinPromptsDirectory();
    const files = readdirSync(directory).filter((name) => name.endsWith('.jsonl'));
    expect(files).toContain('general-instructions.jsonl');
    const records = files.flatMap((name) =>
      readFileSync(join(directory, name), 'utf8')
        .split('\n')
        .filter((line) => line.trim() !== '')
        .map((line) => JSON.parse(line) as Record<string, unknown>),
    );
    expect(records.length).toBeGreaterThanOrEqual(60);
    const found = records.flatMap((record) => {
      const reason = overlaps(userText(record));
      return reason ? [`${String(record.id)}: ${reason}`] : [];
    });
    expect(found).toEqual([]);
  });
});
