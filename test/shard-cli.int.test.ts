import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { FileArtifactStore } from '../shared/artifacts/file-artifact-store';
import { readManifest } from '../shared/artifacts/manifest';
import { decodeParquet } from '../shared/artifacts/parquet-codec';
import { sampleHarnessDirectory } from '../shared/harness/sample-harness';
import { Template } from '@huggingface/jinja';
import { presetFiles, presetTokenizer } from '../shared/text/__fixtures__/preset-files';
import { normalizeHookMessages } from '../shared/text/hook-messages';
import { loadChatTokenizer } from '../shared/text/load-chat-tokenizer';
import { trajectoryToTemplateInput } from '../shared/text/template-input';
import { tokenizeConversation } from '../shared/text/tokenize-conversation';
import type { ChatMessage, ToolSpec } from '../shared/trajectory/messages';
import type { ShardOutput } from '../workers/shard/shard-contract';
import type { ShardStats } from '../workers/shard/shard-stats';
import { runHatInProcess } from './support/hat-in-process';
import { useLocalS3Server } from './support/s3-server';

/**
 * `hat stage shard` as an operator runs it, on the pipeline's own data: `hat stage collect`
 * (scripted teacher on 120 generated tasks), `hat stage augment` (HSA variants of those
 * trajectories, replay-checked), then `hat stage shard` mixing both sets with weights and one
 * variant held out, writing to a local S3-compatible server. Bad input exits 2 before writing.
 */
describe('hat stage shard', () => {
  const s3 = useLocalS3Server();
  let directory: string;
  const seed = 'shard-cli';
  const environment = () => ({ ...process.env, ...s3.env, HAT_LOG_LEVEL: 'silent' });
  const uri = (name: string) => pathToFileURL(join(directory, name)).href;

  beforeAll(async () => {
    directory = await mkdtemp(join(tmpdir(), 'hat-shard-cli-'));
    await writeFile(
      join(directory, 'collect.yaml'),
      'generate: { count: 120, seed: shard-cli, itemCount: 600 }\ntasksPerPart: 60\n',
    );
    const collected = await runHatInProcess(
      environment(),
      'stage',
      'collect',
      '--config',
      join(directory, 'collect.yaml'),
      '--out',
      uri('collect'),
      '--seed',
      seed,
    );
    expect([collected.code, collected.stderr.slice(-300)]).toEqual([0, expect.any(String)]);
    await writeFile(
      join(directory, 'augment.yaml'),
      `trajectories: ["${uri('collect')}/manifest.json"]\ntasks: ["${uri('collect')}/manifest.json"]\nharness: ${sampleHarnessDirectory()}\nvariantsPerTrajectory: 2\nvariantPool: 6\nrecordsPerPart: 60\n`,
    );
    const augmented = await runHatInProcess(
      environment(),
      'stage',
      'augment',
      '--config',
      join(directory, 'augment.yaml'),
      '--out',
      uri('augment'),
      '--seed',
      seed,
    );
    expect([augmented.code, augmented.stderr.slice(-300)]).toEqual([0, expect.any(String)]);
  }, 300_000);
  afterAll(async () => {
    await rm(directory, { recursive: true, force: true });
  });

  it('mixes teacher and HSA trajectories by weight, holds one variant out, and writes shards, exports and the card to S3', async () => {
    const augmentManifest = await readManifest(new FileArtifactStore(join(directory, 'augment')), 'manifest.json');
    const variant = augmentManifest.objects.find((object) => object.kind === 'variant')!.key.split('/')[1];
    await writeFile(
      join(directory, 'shard.yaml'),
      [
        'inputs:',
        `  - { uri: "${uri('collect')}/manifest.json", weight: 1, name: teacher }`,
        `  - { uri: "${uri('augment')}/manifest.json", weight: 0.5, name: hsa }`,
        `heldOut: { variantHashes: [${variant}] }`,
        'recordsPerPart: 100',
        'validationFraction: 0.1',
        '',
      ].join('\n'),
    );
    const out = s3.freshUri();
    const result = await runHatInProcess(
      environment(),
      'stage',
      'shard',
      '--config',
      join(directory, 'shard.yaml'),
      '--out',
      out,
      '--seed',
      seed,
      '--json',
    );
    expect([result.code, result.stderr.slice(-500)]).toEqual([0, expect.stringContaining('shard: completed')]);
    const output = JSON.parse(result.stdout) as ShardOutput;
    expect(output.manifestUri).toBe(`${out}/manifest.json`);
    const store = s3.store({ prefix: out.split('/').slice(3).join('/') });
    const manifest = await readManifest(store, 'manifest.json');
    const stats = JSON.parse((await store.getBuffer('stats.json')).toString('utf8')) as ShardStats;

    expect(stats.inputs.map((set) => set.name)).toEqual(['teacher', 'hsa']);
    const [teacher, hsa] = stats.inputs;
    expect(teacher.records).toBe(120);
    expect(hsa.records).toBeGreaterThan(120);
    expect(output.records).toBe(teacher.records + hsa.records);
    expect(
      output.samples + output.duplicates + Object.values(output.rejected).reduce((sum, count) => sum + count, 0),
    ).toBe(output.records);
    expect(hsa.trainSamples).toBeLessThan(hsa.accepted);
    expect(Object.keys(output.splits).sort()).toEqual(['heldout', 'train', 'validation']);
    expect(stats.splits.heldout!.uniqueSamples).toBeGreaterThan(0);
    for (const figures of Object.values(output.splits)) expect(figures.fill).toBeGreaterThan(0.5);

    // Every object the manifest lists is there; shards hold token ids the tokenizer gives for the rendered conversations.
    const kinds = manifest.objects.map((object) => object.kind);
    for (const kind of [
      'packed',
      'sft-openai',
      'sft-ms-swift',
      'sft-llama-factory',
      'verl-sft',
      'card',
      'stats',
      'llama-factory-dataset-info',
    ])
      expect(kinds).toContain(kind);
    const tokenizer = await loadChatTokenizer({ preset: 'qwen3' });
    const rows = (await decodeParquet(await store.getBuffer('train/packed-00000.parquet'))) as Array<{
      input_ids: number[];
      loss_mask: number[];
      cu_seqlens: number[];
      source_ids: string[];
    }>;
    const conversations = new Map(
      gunzipSync(await store.getBuffer('train/openai.jsonl.gz'))
        .toString('utf8')
        .trim()
        .split('\n')
        .map((line) => {
          const record = JSON.parse(line) as { id: string; source_id: string };
          return [record.id, record] as const;
        }),
    );
    const trained = new Map<string, { messages: ChatMessage[]; tools: ToolSpec[] }>();
    for (const [, name] of [
      ['teacher', 'collect'],
      ['hsa', 'augment'],
    ]) {
      for (const object of (
        await readManifest(new FileArtifactStore(join(directory, name)), 'manifest.json')
      ).objects.filter(
        (candidate) => (candidate.kind ?? 'trajectories') === 'trajectories' && candidate.key.endsWith('.jsonl.gz'),
      )) {
        for (const line of gunzipSync(await new FileArtifactStore(join(directory, name)).getBuffer(object.key))
          .toString('utf8')
          .trim()
          .split('\n')) {
          const trajectory = JSON.parse(line) as { id: string; messages: ChatMessage[]; tools: ToolSpec[] };
          trained.set(trajectory.id, trajectory);
        }
      }
    }
    for (const row of rows.slice(0, 4)) {
      for (const [index, sourceId] of row.source_ids.entries()) {
        const id = sourceId.replace(/@\d+$/, '');
        expect(conversations.has(sourceId)).toBe(true);
        const trajectory = trained.get(id)!;
        const expected = tokenizeConversation(tokenizer, trajectory.messages, trajectory.tools, {
          trainOn: 'all',
          now: new Date('2025-01-01T00:00:00Z'),
        });
        if (!expected.ok) throw new Error(expected.reason);
        const [start, end] = [row.cu_seqlens[index], row.cu_seqlens[index + 1]];
        expect(row.input_ids.slice(start, end)).toEqual(tokenizer.encode(expected.sample.text));
        expect(row.loss_mask.slice(start, end)).toEqual(expected.sample.lossMask);
      }
    }
    const card = (await store.getBuffer('README.md')).toString('utf8');
    expect(card).toContain('| hsa | 0.5 |');
    expect(card).toContain(`variants \`${variant}\``);

    // Plain --in URIs: one set of weight 1, defaults everywhere else.
    const plain = await runHatInProcess(
      environment(),
      'stage',
      'shard',
      '--in',
      `${uri('collect')}/manifest.json`,
      '--out',
      uri('plain'),
      '--seed',
      seed,
      '--json',
    );
    expect(plain.code).toBe(0);
    expect(JSON.parse(plain.stdout) as ShardOutput).toMatchObject({ records: 120, duplicates: 0 });
  }, 300_000);

  it('keeps every collected and augmented sample with Qwen3 and with the Qwen3.5 template in both thinking modes, ids equal to a direct render of the normalized conversation', async () => {
    const originals = new Map<string, { messages: ChatMessage[]; tools: ToolSpec[] }>();
    for (const name of ['collect', 'augment']) {
      const store = new FileArtifactStore(join(directory, name));
      for (const object of (await readManifest(store, 'manifest.json')).objects.filter(
        (candidate) => (candidate.kind ?? 'trajectories') === 'trajectories' && candidate.key.endsWith('.jsonl.gz'),
      )) {
        for (const line of gunzipSync(await store.getBuffer(object.key))
          .toString('utf8')
          .trim()
          .split('\n')) {
          const trajectory = JSON.parse(line) as { id: string; messages: ChatMessage[]; tools: ToolSpec[] };
          originals.set(trajectory.id, trajectory);
        }
      }
    }
    // The set carries hook injections as system messages after the first turn: what Qwen3.5 refuses as they are.
    const withHooks = [...originals.values()].filter((trajectory) =>
      trajectory.messages.slice(1).some((message) => message.role === 'system'),
    );
    expect(withHooks.length).toBeGreaterThan(originals.size / 4);

    const qwen35Path = join(__dirname, '..', 'shared', 'text', '__fixtures__', 'chat-templates', 'Qwen3.5-4B.jinja');
    const qwen35 = await readFile(qwen35Path, 'utf8');
    const qwen3 = presetFiles('qwen3').config.chat_template as string;
    const own = presetTokenizer('qwen3');
    const settings = [
      { name: 'qwen3', yaml: '', template: qwen3, form: 'system-messages' as const, thinking: undefined },
      {
        name: 'qwen3_5-thinking',
        yaml: `tokenizer: { preset: qwen3, chatTemplate: "${qwen35Path}" }\n`,
        template: qwen35,
        form: 'folded' as const,
        thinking: undefined,
      },
      {
        name: 'qwen3_5-no-thinking',
        yaml: `tokenizer: { preset: qwen3, chatTemplate: "${qwen35Path}" }\nenableThinking: false\n`,
        template: qwen35,
        form: 'folded' as const,
        thinking: false,
      },
    ];
    for (const setting of settings) {
      await writeFile(
        join(directory, `${setting.name}.yaml`),
        `inputs: ["${uri('collect')}/manifest.json", "${uri('augment')}/manifest.json"]\nvalidationFraction: 0\nsequenceLength: 32768\nrecordsPerPart: 200\n${setting.yaml}`,
      );
      const result = await runHatInProcess(
        environment(),
        'stage',
        'shard',
        '--config',
        join(directory, `${setting.name}.yaml`),
        '--out',
        uri(setting.name),
        '--seed',
        seed,
        '--json',
      );
      expect([setting.name, result.code, result.stderr.slice(-400)]).toEqual([setting.name, 0, expect.any(String)]);
      const output = JSON.parse(result.stdout) as ShardOutput;
      expect([setting.name, output.rejected, output.overLength]).toEqual([
        setting.name,
        {},
        { dropped: 0, truncated: 0 },
      ]);
      expect(output.samples + output.duplicates).toBe(output.records);

      const store = new FileArtifactStore(join(directory, setting.name));
      const template = new Template(setting.template);
      let checked = 0;
      for (const object of (await readManifest(store, 'manifest.json')).objects.filter(
        (candidate) => candidate.kind === 'packed',
      )) {
        const rows = (await decodeParquet(await store.getBuffer(object.key))) as Array<{
          input_ids: number[];
          cu_seqlens: number[];
          source_ids: string[];
          folded_hook_messages: number[];
        }>;
        for (const row of rows) {
          for (const [index, sourceId] of row.source_ids.entries()) {
            const original = originals.get(sourceId.replace(/@\d+$/, ''))!;
            const normalized = normalizeHookMessages(original.messages, setting.form);
            if (!normalized.ok) throw new Error(normalized.reason);
            expect(row.folded_hook_messages[index]).toBe(normalized.normalization.folded);
            const input = trajectoryToTemplateInput(normalized.messages, original.tools);
            const text = template.render({
              messages: input.messages,
              ...(input.tools.length > 0 ? { tools: input.tools } : {}),
              add_generation_prompt: false,
              ...(setting.thinking === undefined ? {} : { enable_thinking: setting.thinking }),
            });
            expect(row.input_ids.slice(row.cu_seqlens[index], row.cu_seqlens[index + 1])).toEqual(
              own.encode(text, { add_special_tokens: false }).ids,
            );
            checked++;
          }
        }
      }
      expect(checked).toBeGreaterThanOrEqual(output.samples);
      // Every published export carries folded_hook_messages per sample: the JSONL formats and verl's Parquet.
      const foldedOf = (sourceId: string) => {
        const normalized = normalizeHookMessages(originals.get(sourceId)!.messages, setting.form);
        if (!normalized.ok) throw new Error(normalized.reason);
        return normalized.normalization.folded;
      };
      const exported: Record<string, number> = {};
      let foldedSeen = 0;
      for (const object of (await readManifest(store, 'manifest.json')).objects) {
        const kind = object.kind ?? '';
        const records = kind.startsWith('sft-')
          ? gunzipSync(await store.getBuffer(object.key))
              .toString('utf8')
              .split('\n')
              .filter((line) => line !== '')
              .map((line) => JSON.parse(line) as Record<string, unknown>)
          : kind === 'verl-sft'
            ? ((await decodeParquet(await store.getBuffer(object.key))) as Array<Record<string, unknown>>)
            : undefined;
        if (!records) continue;
        for (const record of records) {
          expect([object.key, record.folded_hook_messages]).toEqual([object.key, foldedOf(record.source_id as string)]);
          foldedSeen += record.folded_hook_messages as number;
        }
        exported[kind] = records.length;
      }
      expect(Object.keys(exported)).toEqual(expect.arrayContaining(['sft-openai', 'verl-sft']));
      if (setting.form === 'folded') expect(foldedSeen).toBeGreaterThan(0);
      else expect(foldedSeen).toBe(0);
      // Which normalization applied is recorded: per entry (foldedHookMessages, mergedPromptChars) and summed in the stats.
      const stats = JSON.parse((await store.getBuffer('stats.json')).toString('utf8')) as ShardStats;
      expect(stats.template.hookMessages).toBe(setting.form);
      if (setting.form === 'folded') expect(stats.template.samplesWithFoldedHooks).toBeGreaterThan(0);
      else expect(stats.template.samplesWithFoldedHooks).toBe(0);
      // Only thinking mode serves `<think>\n`, which the rendering merges into `\n\n`.
      if (setting.name === 'qwen3_5-thinking') expect(stats.template.samplesWithMergedStart).toBe(output.samples);
      else expect(stats.template.samplesWithMergedStart).toBe(0);
    }
  }, 600_000);

  it('refuses bad input with exit code 2 and a message that names the field', async () => {
    const missing = await runHatInProcess(
      environment(),
      'stage',
      'shard',
      '--in',
      uri('nothing.jsonl.gz'),
      '--out',
      uri('bad'),
    );
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('[MISSING_INPUT] inputs[0].uri');
    await writeFile(join(directory, 'bad.yaml'), 'inputs: [x.jsonl.gz]\nsequenceLength: 4\npacking: maybe\n');
    const invalid = await runHatInProcess(
      environment(),
      'stage',
      'shard',
      '--config',
      join(directory, 'bad.yaml'),
      '--out',
      uri('bad'),
    );
    expect(invalid.code).toBe(2);
    expect(invalid.stderr).toContain('STAGE_INPUT_INVALID');
    expect(invalid.stderr).toContain('sequenceLength');
    expect(invalid.stderr).toContain('packing');
  });
});
