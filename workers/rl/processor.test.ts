import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runStageLocally } from '../../queues/stage-kit/run-stage-locally';
import { openArtifactObject } from '../../shared/artifacts/create-artifact-store';
import { FileArtifactStore } from '../../shared/artifacts/file-artifact-store';
import { readJsonl } from '../../shared/artifacts/jsonl-reader';
import { readManifest } from '../../shared/artifacts/manifest';
import { readParquet } from '../../shared/artifacts/parquet-codec';
import { silentLogger } from '../../shared/log/logger';
import { loadChatTokenizer } from '../../shared/text/load-chat-tokenizer';
import type { AssistantMessage, ChatMessage } from '../../shared/trajectory/messages';
import type { EpisodeRecord } from './episode-records';
import { rlStage } from './processor';
import type { RlInputConfig, RlOutput } from './rl-contract';
import type { RlStats } from './rl-stats';

const directories: string[] = [];
afterAll(async () => {
  await Promise.all(directories.map((directory) => rm(directory, { recursive: true, force: true })));
});

const fixedClock = { now: () => Date.parse('2025-03-01T00:00:00Z') };

async function runRl(
  config: RlInputConfig,
  seed = 'unit',
  into?: string,
): Promise<{ store: FileArtifactStore; output: RlOutput }> {
  const directory = into ?? (await mkdtemp(join(tmpdir(), 'hat-rl-')));
  directories.push(directory);
  const store = new FileArtifactStore(directory);
  const result = await runStageLocally(rlStage, config, {
    store,
    openObject: (uri) => openArtifactObject(uri),
    logger: silentLogger(),
    seed,
    clock: fixedClock,
    concurrency: 1,
  });
  return { store, output: result.output as RlOutput };
}

async function records(store: FileArtifactStore): Promise<EpisodeRecord[]> {
  const manifest = await readManifest(store, 'manifest.json');
  const all: EpisodeRecord[] = [];
  for (const object of manifest.objects.filter((entry) => /^part-\d+\.jsonl\.gz$/.test(entry.key))) {
    for await (const record of readJsonl<EpisodeRecord>(store, object.key)) all.push(record);
  }
  return all;
}

async function statsOf(store: FileArtifactStore): Promise<RlStats> {
  return JSON.parse((await store.getBuffer('stats.json')).toString('utf8')) as RlStats;
}

const small: RlInputConfig = {
  generate: { count: 12, seed: 'unit' },
  groups: 6,
  groupSize: 4,
  groupsPerPart: 4,
  canonicalShare: 0.34,
};

describe('rl stage (in-process, stochastic scripted policy)', () => {
  let first: { store: FileArtifactStore; output: RlOutput };
  beforeAll(async () => {
    first = await runRl(small);
  });

  it('writes byte-identical outputs under the same seed, and different episodes under another', async () => {
    const manifest = await readManifest(first.store, 'manifest.json');
    const keys = [...manifest.objects.map((object) => object.key), 'manifest.json'];
    const before = new Map<string, Buffer>();
    for (const key of keys) before.set(key, await first.store.getBuffer(key));
    // Again into the same place (manifests hold URIs), from scratch: no part markers to reuse.
    const directory = fileURLToPath(first.store.rootUri);
    await rm(directory, { recursive: true, force: true });
    const second = await runRl(small, 'unit', directory);
    expect(manifest.objects.map((object) => object.key)).toEqual([
      'groups.jsonl.gz',
      'part-00000.jsonl.gz',
      'part-00000.parquet',
      'part-00001.jsonl.gz',
      'part-00001.parquet',
      'plan.json',
      'report.html',
      'stats.json',
    ]);
    for (const key of keys)
      expect({ key, same: (await second.store.getBuffer(key)).equals(before.get(key)!) }).toEqual({ key, same: true });
    const other = await runRl(small, 'another seed');
    expect(
      (await other.store.getBuffer('part-00000.jsonl.gz')).equals(await first.store.getBuffer('part-00000.jsonl.gz')),
    ).toBe(false);
  });

  it('masks exactly the policy tokens: each masked run decodes to one assistant turn, environment tokens stay unmasked', async () => {
    const tokenizer = await loadChatTokenizer({ preset: 'qwen3' });
    const all = await records(first.store);
    expect(all).toHaveLength(24);
    let checked = 0;
    for (const record of all.filter((entry) => entry.status === 'ok')) {
      expect(record.tokens).toHaveLength(record.prompt_length + record.response_length);
      expect(record.loss_mask).toHaveLength(record.response_length);
      const response = record.tokens.slice(record.prompt_length);
      expect(tokenizer.decode(response)).toBe(record.response);
      const runs: number[][] = [];
      record.loss_mask.forEach((bit, position) => {
        if (bit === 1 && (position === 0 || record.loss_mask[position - 1] === 0)) runs.push([]);
        if (bit === 1) runs[runs.length - 1].push(response[position]);
      });
      const messages = JSON.parse(record.messages) as ChatMessage[];
      const assistants = messages.filter((message): message is AssistantMessage => message.role === 'assistant');
      expect(runs).toHaveLength(assistants.length);
      runs.forEach((run, turn) => expect(stripTemplate(tokenizer.decode(run))).toEqual(expectedTurn(assistants[turn])));
      // Every environment token is masked: unmasked tokens hold each tool result and viewer message.
      const unmasked = tokenizer.decode(response.filter((_, position) => record.loss_mask[position] === 0));
      for (const message of messages.slice(messages.findIndex((entry) => entry.role === 'assistant'))) {
        if (message.role === 'tool' || message.role === 'user')
          expect(unmasked).toContain(message.content.slice(0, 40));
      }
      checked++;
    }
    expect(checked).toBeGreaterThan(15);
  });

  it('records rewards, advantages that center each group, harness lineage and pass@k', async () => {
    const all = await records(first.store);
    const stats = await statsOf(first.store);
    const byGroup = new Map<number, EpisodeRecord[]>();
    for (const record of all) byGroup.set(record.group_index, [...(byGroup.get(record.group_index) ?? []), record]);
    expect([...byGroup.keys()].sort()).toEqual([0, 1, 2, 3, 4, 5]);
    for (const group of byGroup.values()) {
      expect(group.map((record) => record.index)).toEqual(
        group.map((record) => record.group_index * 4 + record.sample_index),
      );
      expect(new Set(group.map((record) => record.task_id)).size).toBe(1);
      expect(new Set(group.map((record) => record.harness_hash)).size).toBe(1);
      expect(Math.abs(group.reduce((sum, record) => sum + record.advantage, 0))).toBeLessThan(1e-9);
      const rewards = group.map((record) => record.reward);
      if (Math.max(...rewards) === Math.min(...rewards))
        expect(group.every((record) => record.advantage === 0)).toBe(true);
      else expect(Math.max(...group.map((record) => Math.abs(record.advantage)))).toBeGreaterThan(0.8);
      const [head] = group;
      if (head.canonical_harness) expect(head).toMatchObject({ variant_hash: null, harness_families: [] });
      else expect(head.harness_families.length).toBeGreaterThan(0);
      expect(head.metadata).toMatchObject({
        policy: { provider: 'scripted', simulated: true },
        task_category: head.task_category,
      });
    }
    expect(stats.counts.groups).toMatchObject({ played: 6, canonical: 2, variant: 4, kept: 6 });
    expect(stats.policy).toEqual({
      provider: 'scripted',
      modelId: 'scripted-stochastic (simulation policy)',
      simulated: true,
    });
    const values = stats.passAtK.all.map((entry) => entry.value!);
    expect(values).toHaveLength(4);
    expect([...values].sort((a, b) => a - b)).toEqual(values);
    const gap = stats.canonicalVariantGap;
    expect(gap.gap).toBeCloseTo(gap.canonicalMean! - gap.variantMean!, 5);
    expect(stats.reward.all.episodes).toBe(24);
    const html = (await first.store.getBuffer('report.html')).toString('utf8');
    expect(html).toContain('simulation');
    expect(html).toContain('pass@4');
  });

  it('keeps or drops zero-variance and failed groups by option, counting them either way', async () => {
    // Two model calls per turn: answers that need tools in two rounds hit the step limit.
    const base: RlInputConfig = {
      ...small,
      maxStepsPerTurn: 2,
      groups: 8,
      groupSize: 3,
      groupsPerPart: 8,
      policy: {
        adapter: 'scripted',
        policy: 'stochastic',
        errorRates: {
          hallucinatedNumber: 0,
          bannedWord: 0,
          overlongReply: 0,
          wrongArgument: 0,
          wrongTool: 0,
          malformedJson: 0.3,
        },
      },
    };
    const kept = await runRl(base);
    const dropped = await runRl({ ...base, zeroVarianceGroups: 'drop', groupsWithFailures: 'drop' });
    const keptStats = await statsOf(kept.store);
    const droppedStats = await statsOf(dropped.store);
    const { zeroVariance, withFailures } = keptStats.counts.groups;
    expect(zeroVariance).toBeGreaterThan(0);
    expect(withFailures).toBeGreaterThan(0);
    expect(keptStats.counts.groups).toMatchObject({
      played: 8,
      kept: 8,
      zeroVarianceDropped: 0,
      withFailuresDropped: 0,
    });
    expect(droppedStats.counts.groups).toMatchObject({
      played: 8,
      zeroVariance,
      withFailures,
      zeroVarianceDropped: zeroVariance,
      withFailuresDropped: withFailures,
    });
    // The reward figures cover every scored episode whatever was dropped.
    expect(droppedStats.reward).toEqual(keptStats.reward);

    const keptRecords = await records(kept.store);
    const droppedRecords = await records(dropped.store);
    const failedGroups = new Set(
      keptRecords.filter((record) => record.status !== 'ok').map((record) => record.group_index),
    );
    expect(failedGroups.size).toBe(withFailures);
    const flatGroups = new Set(
      keptRecords
        .filter((record) => record.metadata.group && (record.metadata.group as { zeroVariance: boolean }).zeroVariance)
        .map((record) => record.group_index),
    );
    expect(flatGroups.size).toBe(zeroVariance);
    const survivors = new Set(
      [...Array(8).keys()].filter((group) => !failedGroups.has(group) && !flatGroups.has(group)),
    );
    expect(new Set(droppedRecords.map((record) => record.group_index))).toEqual(survivors);
    expect(droppedStats.counts.groups.kept).toBe(survivors.size);
    expect(droppedStats.counts.episodes.written).toBe(survivors.size * 3);
    expect((await readParquet(dropped.store, 'part-00000.parquet')).length).toBe(survivors.size * 3);

    const stepLimited = keptRecords.find((record) => record.status === 'step_limit')!;
    expect(stepLimited.status_reason).toMatch(/no reply after 2 model calls/);
  });

  it('records episodes whose token view fails the mask check as mask_failed, with the reason, still scored', async () => {
    // The registry's Llama 3.1 template drops tool calls: a conversation with calls cannot be masked.
    const { store, output } = await runRl({ ...small, groups: 3, groupSize: 2, tokenizer: { preset: 'llama3_1' } });
    const all = await records(store);
    const failed = all.filter((record) => record.status === 'mask_failed');
    expect(failed.length).toBeGreaterThan(0);
    // Scored episodes only (ok or step_limit: which of them occur depends on the harness variants drawn).
    for (const record of failed) {
      expect(record.status_reason).toMatch(/^\[TOOL_CALLS_NOT_RENDERED\] assistant message \d+ has tool calls/);
      expect(record).toMatchObject({
        tokens: [],
        loss_mask: [],
        response_length: 0,
        metadata: {
          episode_status: expect.stringMatching(/^(ok|step_limit)$/),
          token_view: { ok: false, code: 'TOOL_CALLS_NOT_RENDERED' },
        },
      });
    }
    const stats = await statsOf(store);
    expect(stats.counts.episodes.tokenViewFailures).toEqual({ TOOL_CALLS_NOT_RENDERED: failed.length });
    expect(stats.counts.episodes.byStatus.mask_failed).toBe(failed.length);
    // Their rewards still judge the policy: every episode is scored.
    expect(stats.counts.episodes.scored).toBe(output.episodes);
  });
});

/** The assistant turn's own text: the Qwen3 template's empty think block is part of the trained span. */
function stripTemplate(decoded: string): string {
  return decoded.replace(/^<think>\n\n<\/think>\n\n/, '');
}

/** What a masked run must hold for this assistant message: its content, or its calls, then the end-of-turn token. */
function expectedTurn(message: AssistantMessage): string {
  if (!message.tool_calls?.length) return `${message.content ?? ''}<|im_end|>`;
  const calls = message.tool_calls.map((call) => {
    let args: unknown;
    try {
      args = JSON.parse(call.function.arguments);
    } catch {
      args = call.function.arguments;
    }
    return `<tool_call>\n${pythonJson({ name: call.function.name, arguments: args })}\n</tool_call>`;
  });
  return `${message.content ? `${message.content}\n\n` : ''}${calls.join('\n')}<|im_end|>`;
}

/** JSON as the template's `tojson` writes it (Python separators, non-ASCII kept); a string argument goes in verbatim. */
function pythonJson(value: unknown): string {
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
    const entries = Object.entries(value as Record<string, unknown>).map(
      ([key, item]) =>
        `${JSON.stringify(key)}: ${key === 'arguments' && typeof item === 'string' ? item : pythonJson(item)}`,
    );
    return `{${entries.join(', ')}}`;
  }
  if (Array.isArray(value)) return `[${value.map(pythonJson).join(', ')}]`;
  return JSON.stringify(value);
}
