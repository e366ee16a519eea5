import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { Template } from '@huggingface/jinja';
import { DuckDBInstance } from '@duckdb/node-api';
import { createArtifactStore } from '../shared/artifacts/create-artifact-store';
import { FileArtifactStore } from '../shared/artifacts/file-artifact-store';
import { writeJsonl } from '../shared/artifacts/jsonl-writer';
import { readManifest } from '../shared/artifacts/manifest';
import { decodeParquet, parquetMetadataOf } from '../shared/artifacts/parquet-codec';
import { loadHarness } from '../shared/harness/load-harness';
import { sampleHarnessDirectory } from '../shared/harness/sample-harness';
import { createLogger } from '../shared/log/logger';
import { golden } from '../shared/text/__fixtures__/golden';
import { presetFiles, presetTokenizer } from '../shared/text/__fixtures__/preset-files';
import {
  sampleConversations,
  toolSession,
  type SampleConversation,
} from '../shared/text/__fixtures__/sample-conversations';
import { specialTokenText, type ChatTokenizer } from '../shared/text/chat-tokenizer';
import { loadChatTokenizer } from '../shared/text/load-chat-tokenizer';
import { trajectoryToTemplateInput } from '../shared/text/template-input';
import { tokenizeConversation } from '../shared/text/tokenize-conversation';
import type { ChatMessage } from '../shared/trajectory/messages';
import type { Trajectory } from '../shared/trajectory/trajectory';
import { runStageLocally } from '../queues/stage-kit/run-stage-locally';
import { createStoreCache } from '../queues/bullmq/stage-runtime';
import { expertTrajectories } from '../workers/augment/expert-trajectories';
import { shardStage } from '../workers/shard/processor';
import type { ShardOutput } from '../workers/shard/shard-contract';
import type { ShardStats } from '../workers/shard/shard-stats';

/**
 * The shard stage on realistic trajectories (the simulator's scripted expert under the sample
 * live-host harness, plus hand-built conversations with Chinese text, emoji, nested and invalid
 * arguments, parallel calls and several turns), run in-process as `hat stage` runs it, with every
 * output read back: samples equal the template rendered directly and the tokenizer's own ids,
 * masks equal the recorded golden masks, packing boundaries and positions are right, DuckDB reads
 * the Parquet with the same values, and reruns give the same bytes.
 */

const renderDate = '2025-01-02T03:04:05.000Z';
const now = new Date(renderDate);
const padId = 151643;

function fixtureTrajectory(conversation: SampleConversation, overrides: Partial<Trajectory> = {}): Trajectory {
  return {
    schemaVersion: 1,
    id: `fixture-${conversation.name}`,
    taskId: `task-${conversation.name}`,
    category: 'fixture',
    messages: conversation.messages,
    tools: conversation.tools,
    harness: { id: 'fixture', version: '1', hash: 'fixture-hash' },
    model: { provider: 'test', id: 'hand-written', sampling: {}, simulated: true },
    calls: [],
    issues: [],
    status: 'ok',
    reward: { total: 1, components: {}, notes: [] },
    sampleIndex: 0,
    meta: {},
    ...overrides,
  };
}

const fixtures = sampleConversations.map((conversation) => fixtureTrajectory(conversation));

/** A harness-variant rewrite of a trajectory: tools renamed (as HSA's tool_schemas family does), tagged with the variant. */
function variantOf(trajectory: Trajectory, variantHash: string, families: string[]): Trajectory {
  const rename = (name: string) => `${name}_${variantHash.slice(-1)}`;
  return {
    ...trajectory,
    id: `${trajectory.id}-${variantHash}`,
    harness: { ...trajectory.harness, variantHash, families },
    tools: trajectory.tools.map((tool) => ({
      ...tool,
      function: { ...tool.function, name: rename(tool.function.name) },
    })),
    messages: trajectory.messages.map((message): ChatMessage =>
      message.role === 'assistant' && message.tool_calls
        ? {
            ...message,
            tool_calls: message.tool_calls.map((call) => ({
              ...call,
              function: { ...call.function, name: rename(call.function.name) },
            })),
          }
        : message,
    ),
    meta: { sourceTrajectoryId: trajectory.id },
  };
}

interface Segment {
  sourceId: string;
  ids: number[];
  mask: number[];
  labels: number[];
  positions: number[];
}

interface PackedRow {
  input_ids: number[];
  labels: number[];
  loss_mask: number[];
  position_ids: number[];
  cu_seqlens: number[];
  source_ids: string[];
  num_samples: number;
  num_tokens: number;
  num_trained: number;
}

/** The samples of a packed row, cut at cu_seqlens; checks the padding segment on the way. */
function segmentsOf(row: PackedRow, sequenceLength: number): Segment[] {
  expect(row.input_ids).toHaveLength(sequenceLength);
  expect(row.cu_seqlens[0]).toBe(0);
  expect(row.cu_seqlens.at(-1)).toBe(sequenceLength);
  const segments = row.source_ids.map((sourceId, index) => {
    const [start, end] = [row.cu_seqlens[index], row.cu_seqlens[index + 1]];
    return {
      sourceId,
      ids: row.input_ids.slice(start, end),
      mask: row.loss_mask.slice(start, end),
      labels: row.labels.slice(start, end),
      positions: row.position_ids.slice(start, end),
    };
  });
  expect(row.num_samples).toBe(segments.length);
  expect(row.num_tokens).toBe(row.cu_seqlens[segments.length]);
  expect(row.num_trained).toBe(row.loss_mask.reduce((sum, bit) => sum + bit, 0));
  const padding = row.input_ids.slice(row.num_tokens);
  expect(padding.every((id) => id === padId)).toBe(true);
  expect(row.loss_mask.slice(row.num_tokens).every((bit) => bit === 0)).toBe(true);
  expect(row.position_ids.slice(row.num_tokens)).toEqual(padding.map((_, index) => index));
  for (const segment of segments) {
    expect(segment.positions).toEqual(segment.ids.map((_, index) => index));
    expect(segment.labels).toEqual(segment.ids.map((id, index) => (segment.mask[index] === 1 ? id : -100)));
  }
  return segments;
}

/** The sample's text with trained runs in ⟦⟧, as shared/text's markTrainedText writes golden masks. */
function markedText(tokenizer: ChatTokenizer, segment: Segment): string {
  let text = '';
  let start = 0;
  for (let index = 1; index <= segment.ids.length; index++) {
    if (index === segment.ids.length || segment.mask[index] !== segment.mask[start]) {
      const piece = tokenizer.decode(segment.ids.slice(start, index));
      text += segment.mask[start] === 1 ? `⟦${piece}⟧` : piece;
      start = index;
    }
  }
  return text;
}

describe('shard stage', () => {
  let root: string;
  let simulated: Trajectory[];
  let tokenizer: ChatTokenizer;
  const env = {} as Parameters<typeof createStoreCache>[0];
  const stores = createStoreCache(env, (rootUri) => createArtifactStore(rootUri, env));
  let runs = 0;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'hat-shard-'));
    tokenizer = await loadChatTokenizer({ preset: 'qwen3' });
    ({ trajectories: simulated } = await expertTrajectories(await loadHarness(sampleHarnessDirectory()), {
      count: 24,
      seed: 'shard-int',
    }));
  });
  afterAll(async () => {
    await stores.close();
    await rm(root, { recursive: true, force: true });
  });

  async function writeInput(name: string, trajectories: Trajectory[]): Promise<string> {
    const info = await writeJsonl(stores.storeFor(`file://${root}/inputs`), `${name}.jsonl.gz`, trajectories);
    return info.uri;
  }

  async function runShard(config: Record<string, unknown>, options: { directory?: string; seed?: string } = {}) {
    const directory = options.directory ?? join(root, `out-${++runs}`);
    const store = stores.storeFor(`file://${directory}`);
    const result = await runStageLocally(
      shardStage,
      { renderDate, ...config },
      {
        store,
        openObject: stores.openObject,
        logger: createLogger({ level: 'silent' }),
        seed: options.seed ?? 'shard-int',
        clock: { now: () => Date.parse('2025-03-01T00:00:00Z') },
      },
    );
    const stats = JSON.parse((await store.getBuffer('stats.json')).toString('utf8')) as ShardStats;
    const rows = async (key: string) => (await decodeParquet(await store.getBuffer(key))) as unknown as PackedRow[];
    return { directory, store, output: result.output as ShardOutput, parts: result.parts, stats, rows };
  }

  it('renders with the target template, tokenizes with the target tokenizer, masks only assistant output, and packs with correct boundaries', async () => {
    const input = await writeInput('mixed', [...fixtures, ...simulated]);
    const run = await runShard({ inputs: [input], sequenceLength: 16384, validationFraction: 0, recordsPerPart: 10 });
    expect(run.parts).toBe(3);
    expect(run.output).toMatchObject({
      records: 29,
      samples: 29,
      duplicates: 0,
      rejected: {},
      overLength: { dropped: 0, truncated: 0 },
    });
    const config = presetFiles('qwen3').config;
    const template = new Template(config.chat_template as string);
    const own = presetTokenizer('qwen3');
    const byId = new Map([...fixtures, ...simulated].map((trajectory) => [trajectory.id, trajectory]));
    const rows = await run.rows('train/packed-00000.parquet');
    expect(rows.length).toBe(run.output.splits.train.sequences);
    // Several samples share a sequence: the small hand-built conversations pack with the long ones.
    expect(Math.max(...rows.map((row) => row.num_samples))).toBeGreaterThan(1);
    const seen = new Set<string>();
    for (const row of rows) {
      for (const segment of segmentsOf(row, 16384)) {
        const trajectory = byId.get(segment.sourceId)!;
        seen.add(segment.sourceId);
        const templateInput = trajectoryToTemplateInput(
          trajectory.messages,
          trajectory.tools,
          tokenizer.templateFeatures,
        );
        const direct = template.render({
          messages: templateInput.messages,
          tools: templateInput.tools,
          add_generation_prompt: false,
          bos_token: specialTokenText(config.bos_token),
          eos_token: specialTokenText(config.eos_token),
        });
        expect(tokenizer.decode(segment.ids)).toBe(direct);
        expect(segment.ids).toEqual(own.encode(direct, { add_special_tokens: false }).ids);
        const marked = markedText(tokenizer, segment);
        const fixture = sampleConversations.find((conversation) => `fixture-${conversation.name}` === segment.sourceId);
        if (fixture) expect(marked).toBe(golden(`qwen3/${fixture.name}.mask.txt`, marked));
        // Every trained run is one assistant turn through <|im_end|>, right after the untrained header.
        const runs = [...marked.matchAll(/⟦([\s\S]*?)⟧/g)];
        expect(runs).toHaveLength(trajectory.messages.filter((message) => message.role === 'assistant').length);
        for (const match of runs) {
          expect(match[1].endsWith('<|im_end|>')).toBe(true);
          expect(marked.slice(0, match.index).endsWith('<|im_start|>assistant\n')).toBe(true);
        }
      }
    }
    expect(seen.size).toBe(29);
    expect(run.stats.splits.train).toMatchObject({ uniqueSamples: 29, samples: 29, tasks: 29 });
    const footer = await parquetMetadataOf(await run.store.getBuffer('train/packed-00000.parquet'));
    expect(footer).toMatchObject({
      'hat.tokenizer_fingerprint': tokenizer.fingerprint,
      'hat.template_hash': tokenizer.templateHash,
      'hat.sequence_length': '16384',
      'hat.pad_token_id': String(padId),
      'hat.split': 'train',
    });

    // The JSONL exports hold the same conversations; the card tells the figures.
    const openai = gunzipSync(await run.store.getBuffer('train/openai.jsonl.gz'))
      .toString('utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { id: string; messages: unknown[]; tools: string });
    expect(openai.map((record) => record.id)).toEqual([...fixtures, ...simulated].map((trajectory) => trajectory.id));
    expect(JSON.parse(openai[0].tools)).toEqual(toolSession.tools);
    const card = (await run.store.getBuffer('README.md')).toString('utf8');
    expect(card).toContain('| train | 29 | 29 | 29 |');
    expect(card).toContain(`fingerprint \`${tokenizer.fingerprint.slice(0, 16)}\``);
  });

  it('writes Parquet that DuckDB reads back with identical values', async () => {
    const input = await writeInput('duck', [...fixtures, ...simulated.slice(0, 6)]);
    const run = await runShard({ inputs: [input], sequenceLength: 8192, validationFraction: 0 });
    const ours = await run.rows('train/packed-00000.parquet');
    const instance = await DuckDBInstance.create(':memory:');
    const connection = await instance.connect();
    try {
      const packed = await connection.runAndReadAll(
        `select * exclude (file_row_number) from read_parquet('${join(run.directory, 'train/packed-00000.parquet')}', file_row_number = true) order by file_row_number`,
      );
      expect(packed.getRowObjectsJson()).toEqual(ours);
      const verl = await connection.runAndReadAll(
        `select id, messages, tools, tools_schema_hash, enable_thinking from read_parquet('${join(run.directory, 'train/verl-00000.parquet')}', file_row_number = true) order by file_row_number`,
      );
      const verlRows = verl.getRowObjectsJson() as Array<{
        id: string;
        messages: string;
        tools: string;
        enable_thinking: boolean | null;
      }>;
      const openai = gunzipSync(await run.store.getBuffer('train/openai.jsonl.gz'))
        .toString('utf8')
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { id: string; messages: unknown[]; tools: string });
      expect(verlRows.map((row) => [row.id, JSON.parse(row.messages), row.tools, row.enable_thinking])).toEqual(
        openai.map((record) => [record.id, record.messages, record.tools, null]),
      );
    } finally {
      connection.closeSync();
    }
  });

  it('drops exact duplicates of normalized conversations, keeping the first in input order', async () => {
    const session = fixtures[0];
    const respaced = fixtureTrajectory(toolSession, {
      id: 'respaced-copy',
      messages: toolSession.messages.map((message) =>
        message.role === 'assistant' && message.tool_calls
          ? {
              ...message,
              tool_calls: message.tool_calls.map((call, index) => ({
                ...call,
                id: `other${index}`,
                function: { ...call.function, arguments: JSON.stringify(JSON.parse(call.function.arguments), null, 2) },
              })),
            }
          : message.role === 'user'
            ? { ...message, content: ` ${message.content} ` }
            : message,
      ),
    });
    const first = await writeInput('dedup-a', [session, { ...session, id: 'exact-copy' }]);
    const second = await writeInput('dedup-b', [respaced, fixtures[1]]);
    const run = await runShard({ inputs: [first, second], validationFraction: 0 });
    expect(run.output).toMatchObject({ records: 4, samples: 2, duplicates: 2 });
    expect(run.stats.inputs.map((set) => [set.name, set.records, set.accepted, set.duplicates])).toEqual([
      ['set-1', 2, 1, 1],
      ['set-2', 2, 1, 1],
    ]);
    const ids = (await run.rows('train/packed-00000.parquet')).flatMap((row) => row.source_ids);
    expect(ids.sort()).toEqual([session.id, fixtures[1].id].sort());
  });

  it('splits by task, keeps held-out variants and their tasks out of training', async () => {
    const heldVariants = simulated.slice(0, 6).map((trajectory) => variantOf(trajectory, 'vhash-b', ['hooks']));
    const otherVariants = simulated
      .slice(3, 12)
      .map((trajectory) => variantOf(trajectory, 'vhash-a', ['tool_schemas']));
    const input = await writeInput('variants', [...simulated, ...heldVariants, ...otherVariants]);
    const run = await runShard({ inputs: [input], validationFraction: 0.25, heldOut: { families: ['hooks'] } });
    const taskOf = new Map(
      [...simulated, ...heldVariants, ...otherVariants].map((trajectory) => [trajectory.id, trajectory.taskId]),
    );
    const idsIn = async (split: string) =>
      (await Promise.all(run.stats.splits[split as 'train'] ? [run.rows(`${split}/packed-00000.parquet`)] : []))
        .flat()
        .flatMap((row) => row.source_ids);
    const [train, validation, heldout] = await Promise.all(['train', 'validation', 'heldout'].map(idsIn));
    expect(heldout.sort()).toEqual(heldVariants.map((trajectory) => trajectory.id).sort());
    const trainTasks = new Set(train.map((id) => taskOf.get(id)));
    for (const id of [...validation, ...heldout]) expect(trainTasks.has(taskOf.get(id))).toBe(false);
    // The held-out variants' tasks are evaluation tasks: their other samples went to validation.
    const heldTasks = new Set(heldVariants.map((trajectory) => trajectory.taskId));
    const sameTask = [...simulated, ...otherVariants]
      .filter((trajectory) => heldTasks.has(trajectory.taskId))
      .map((trajectory) => trajectory.id);
    expect(sameTask).toHaveLength(9);
    for (const id of sameTask) expect(validation).toContain(id);
    expect(train.length + validation.length + heldout.length).toBe(
      simulated.length + heldVariants.length + otherVariants.length,
    );
    expect(run.stats.splits.heldout).toMatchObject({ uniqueSamples: 6, tasks: 6 });
    const heldoutExport = gunzipSync(await run.store.getBuffer('heldout/openai.jsonl.gz'))
      .toString('utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { task_id: string });
    expect(heldoutExport.map((record) => record.task_id).sort()).toEqual(
      heldVariants.map((trajectory) => trajectory.taskId).sort(),
    );
  });

  it('truncates an over-length conversation after the last assistant turn that fits, or drops it, by option', async () => {
    const options = { trainOn: 'all' as const, now };
    const lengthOf = (messages: ChatMessage[]) => {
      const result = tokenizeConversation(tokenizer, messages, toolSession.tools, options);
      if (!result.ok) throw new Error(result.reason);
      return result.sample.inputIds.length;
    };
    // toolSession's assistant turns are messages 2, 5, 7, 9: allow the prefix through message 5, not through 7.
    const sequenceLength = lengthOf(toolSession.messages.slice(0, 6)) + 10;
    expect(lengthOf(toolSession.messages.slice(0, 8))).toBeGreaterThan(sequenceLength);
    const input = await writeInput('long', [fixtures[0], fixtures[1]]);

    const truncated = await runShard({
      inputs: [input],
      sequenceLength,
      validationFraction: 0,
      overLength: 'truncate',
    });
    expect(truncated.output.overLength).toEqual({ dropped: 0, truncated: 1 });
    const segments = (await truncated.rows('train/packed-00000.parquet')).flatMap((row) =>
      segmentsOf(row, sequenceLength),
    );
    const cut = segments.find((segment) => segment.sourceId === fixtures[0].id)!;
    const expected = tokenizeConversation(tokenizer, toolSession.messages.slice(0, 6), toolSession.tools, options);
    expect(expected.ok && cut.ids).toEqual(expected.ok && expected.sample.inputIds);
    expect(expected.ok && cut.mask).toEqual(expected.ok && expected.sample.lossMask);
    expect(tokenizer.decode(cut.ids).endsWith('新人可用 NEW20 券打 8 折 🎁<|im_end|>\n')).toBe(true);
    const exported = gunzipSync(await truncated.store.getBuffer('train/openai.jsonl.gz'))
      .toString('utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { id: string; messages: ChatMessage[] });
    expect(exported.find((record) => record.id === fixtures[0].id)!.messages).toHaveLength(6);

    const dropped = await runShard({ inputs: [input], sequenceLength, validationFraction: 0, overLength: 'drop' });
    expect(dropped.output).toMatchObject({
      samples: 1,
      rejected: { OVER_LENGTH: 1 },
      overLength: { dropped: 1, truncated: 0 },
    });
    expect((await dropped.rows('train/packed-00000.parquet')).flatMap((row) => row.source_ids)).toEqual([
      fixtures[1].id,
    ]);
    expect(dropped.stats.rejectionExamples).toEqual([
      {
        code: 'OVER_LENGTH',
        id: fixtures[0].id,
        reason: expect.stringContaining(`more than the sequence length ${sequenceLength}`),
      },
    ]);
  });

  it('mixes input sets by weight in the train split only', async () => {
    const doubled = await writeInput('weight-a', fixtures);
    const halved = await writeInput('weight-b', simulated);
    const run = await runShard({
      inputs: [
        { uri: doubled, weight: 2, name: 'hand' },
        { uri: halved, weight: 0.5, name: 'sim' },
      ],
      validationFraction: 0.2,
      sequenceLength: 16384,
    });
    const [hand, sim] = run.stats.inputs;
    const ids = (await run.rows('train/packed-00000.parquet')).flatMap((row) => row.source_ids);
    const handTrain = ids.filter((id) => id.startsWith('fixture-') && !id.includes('@'));
    expect(hand.trainSamples).toBe(2 * handTrain.length);
    expect(ids.filter((id) => id.startsWith('fixture-') && id.endsWith('@2'))).toHaveLength(handTrain.length);
    expect(sim.trainSamples).toBe(ids.filter((id) => !id.startsWith('fixture-')).length);
    expect(sim.trainSamples).toBeLessThan(sim.accepted);
    expect(sim.trainSamples).toBeGreaterThan(0);
    // Validation takes every sample of its tasks once, whatever the weight.
    const validation = run.stats.splits.validation!;
    expect(validation.samples).toBe(validation.uniqueSamples);
  });

  it('gives byte-identical output for the same input and seed, and a rerun reuses it', async () => {
    const input = await writeInput('repeat', [...fixtures, ...simulated.slice(0, 8)]);
    const config = { inputs: [input], validationFraction: 0.3, recordsPerPart: 5 };
    const first = await runShard(config, { directory: join(root, 'repeat-a') });
    const second = await runShard(config, { directory: join(root, 'repeat-b') });
    const manifest = await readManifest(new FileArtifactStore(first.directory), 'manifest.json');
    expect(manifest.objects.length).toBeGreaterThan(10);
    for (const object of manifest.objects) {
      expect([object.key, await readFile(join(second.directory, object.key))]).toEqual([
        object.key,
        await readFile(join(first.directory, object.key)),
      ]);
    }
    const manifestText = (directory: string) =>
      readFile(join(directory, 'manifest.json'), 'utf8').then((text) => text.replaceAll(directory, '<root>'));
    expect(await manifestText(second.directory)).toBe(await manifestText(first.directory));

    const before = await stat(join(first.directory, 'train/packed-00000.parquet'));
    const again = await runShard(config, { directory: first.directory });
    expect(again.output).toEqual(first.output);
    expect((await stat(join(first.directory, 'train/packed-00000.parquet'))).mtimeMs).toBe(before.mtimeMs);

    const otherSeed = await runShard(config, { seed: 'another-seed' });
    expect(
      Buffer.compare(
        await readFile(join(otherSeed.directory, 'train/packed-00000.parquet')),
        await readFile(join(first.directory, 'train/packed-00000.parquet')),
      ),
    ).not.toBe(0);
  });
});
