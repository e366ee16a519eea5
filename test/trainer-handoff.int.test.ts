import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startCommandTrainer, trainerDirectory, trainerPython, type CommandTrainerEvent } from '../cli/command-trainer';
import { startSimulatedTrainer } from '../cli/simulated-trainer';
import { createArtifactStore } from '../shared/artifacts/create-artifact-store';
import type { ArtifactStore } from '../shared/artifacts/artifact-store';
import { OnnxDecoder } from '../shared/models/onnx/onnx-decoder';
import { getRunStatus } from '../queues/runs/run-control';
import type { CheckpointMarker, TrainingRequest } from '../queues/runs/run-handoff';
import { runManifestSchema } from '../workers/run/run-manifest';
import { runHatInProcess } from './support/hat-in-process';
import { createQueueTestKit, waitFor, type QueueTestKit } from './support/queue-test-kit';
import { useLocalS3Server } from './support/s3-server';

/**
 * Real training answers a handoff: collect -> shard through real queues on a local S3-compatible
 * server, then the `command` executor runs the pipeline's trainer (trainer/, PyTorch) on the
 * shard's packed Parquet, which it reads from S3, and registers the checkpoint with its lineage;
 * the run manifest carries the loss curve and the ONNX export loads in the pipeline's own decoder.
 * A trainer that refuses its input fails the handoff with its last lines.
 */
// Each test trains (or refuses) in a Python process: tens of seconds on a busy 2-core machine.
jest.setTimeout(240_000);
const s3 = useLocalS3Server();

describe('the command executor trains for real', () => {
  let kit: QueueTestKit;
  let directory: string;
  let env: Record<string, string>;
  let root: string;
  let store: ArtifactStore;

  beforeEach(async () => {
    root = s3.freshUri();
    const s3Environment = { ...s3.env, S3_FORCE_PATH_STYLE: 'true' };
    kit = await createQueueTestKit({ HAT_ARTIFACTS: root, ...s3Environment });
    store = createArtifactStore(root, kit.env);
    directory = await mkdtemp(join(tmpdir(), 'hat-trainer-'));
    env = { HAT_REDIS_PREFIX: kit.prefix, HAT_ARTIFACTS: root, HAT_LOG_LEVEL: 'silent', ...s3Environment };
    await kit.startWorkers({
      queues: ['collect', 'shard', 'runs'],
      openStore: (rootUri) => createArtifactStore(rootUri, kit.env),
    });
  });
  afterEach(async () => {
    await store.close();
    await kit.cleanup();
    await rm(directory, { recursive: true, force: true });
  });

  const runConfig = async (runId: string, trainerConfig: string, runArgs: string[] = [], executor = 'command') => {
    const file = join(directory, `${runId}.yaml`);
    await writeFile(
      file,
      [
        `runId: ${runId}`,
        'handoffs:',
        `  sft: { after: [shard], pollSeconds: 1, timeoutMinutes: 10, trainer: { executor: ${executor}, config: ${trainerConfig} } }`,
        'stages:',
        '  collect: { generate: { count: 3, seed: 7 }, tasksPerPart: 3 }',
        '  shard:',
        '    inputs: ["${stages.collect.manifestUri}"]',
        '    tokenizer: { preset: qwen3 }',
        '    sequenceLength: 8192',
        '    validationFraction: 0',
        '',
      ].join('\n'),
    );
    const run = await runHatInProcess({ ...process.env, ...env }, 'run', file, ...runArgs);
    if (runArgs.length === 0) expect([run.code, run.stderr]).toEqual([0, '']);
    return run;
  };

  const trainer = (runId: string, events: CommandTrainerEvent[] = []) =>
    startCommandTrainer(kit.context, {
      runId,
      workDir: join(directory, 'trained'),
      storeFor: (rootUri) => (rootUri === root ? store : createArtifactStore(rootUri, kit.env)),
      environment: { ...process.env, ...env },
      intervalMs: 200,
      onEvent: (event) => events.push(event),
    });

  const finished = (runId: string) =>
    waitFor(async () => {
      const status = await getRunStatus(kit.context, runId);
      return status.state === 'completed' || status.state === 'failed' ? status : undefined;
    }, 240_000);

  it('trains SFT on the shard it reads from S3 and registers a served-ready checkpoint with lineage, loss curve and proofs', async () => {
    expect(existsSync(trainerPython())).toBe(true);
    const tiny =
      '{ seed: 3, maxSteps: 3, model: { layers: 1, hidden: 32, heads: 2, kvHeads: 1, headDim: 16, intermediate: 64 } }';
    await runConfig('train-sft', tiny);
    // `hat train <runId>`: the command executor for a run enqueued elsewhere, until the run ends.
    const training = await runHatInProcess(
      { ...process.env, ...env, HOME: directory },
      'train',
      'train-sft',
      '--no-serve',
      '--out-dir',
      join(directory, 'trained'),
    );
    expect(training.stderr).toMatch(/trained handoff sft: sft, 3 steps, final loss \d+\.\d{4}/);
    expect([training.code, training.stderr.trim().split('\n').at(-1)]).toEqual([0, 'run train-sft completed']);
    const status = await getRunStatus(kit.context, 'train-sft');
    expect([status.state, status.error]).toEqual(['completed', undefined]);

    const requestBytes = await store.getBuffer('runs/train-sft/handoffs/sft/request.json');
    const request = JSON.parse(requestBytes.toString('utf8')) as TrainingRequest;
    expect(request.trainer).toMatchObject({ executor: 'command', config: { maxSteps: 3 } });
    const marker = JSON.parse(
      (await store.getBuffer('runs/train-sft/handoffs/sft/checkpoint.json')).toString('utf8'),
    ) as CheckpointMarker;
    const packed = request.datasets.flatMap((dataset) => dataset.objects).filter((object) => object.kind === 'packed');
    expect(packed.length).toBeGreaterThan(0);
    expect(marker).toMatchObject({
      registeredBy: 'hat-trainer',
      // The version the trainer made (a first handoff: 1), so a stage may reference ${checkpoints.sft.policyVersion}.
      policyVersion: 1,
      tokenizerFingerprint: request.tokenizer?.fingerprint,
      lineage: {
        requestUri: `${root}/runs/train-sft/handoffs/sft/request.json`,
        requestSha256: createHash('sha256').update(requestBytes).digest('hex'),
        trainerConfigHash: expect.stringMatching(/^[0-9a-f]{64}$/),
      },
      training: { objective: 'sft', steps: 3, onnxMaxAbsLogitDiff: expect.any(Number) },
    });
    expect(marker.simulated).toBe(false);
    // The data the trainer read is the data the request listed, object by object.
    expect(marker.lineage?.dataSha256s).toEqual(expect.arrayContaining(packed.map((object) => object.sha256)));
    expect(marker.training?.onnxMaxAbsLogitDiff).toBeLessThan(1e-3);

    // The run manifest carries the training summary and the loss curve, one point per step.
    const manifest = runManifestSchema.parse(
      JSON.parse((await store.getBuffer('runs/train-sft/run-manifest.json')).toString('utf8')),
    );
    const checkpoint = manifest.handoffs?.[0]?.checkpoint;
    expect(checkpoint?.training?.lossCurve?.map((point) => point.step)).toEqual([1, 2, 3]);
    expect(checkpoint?.training?.lossCurve?.every((point) => Number.isFinite(point.loss) && point.loss > 0)).toBe(true);
    const html = (await store.getBuffer('runs/train-sft/run-report.html')).toString('utf8');
    expect(html).toContain('trained: sft, 3 steps');
    expect(html).toContain('aria-label="loss curve of handoff sft"');
    expect(html).not.toContain('SIMULATED TRAINING');

    // The export is a model the pipeline serves: its own decoder loads it over the full Qwen3 ids.
    const modelDir = marker.modelDir as string;
    const config = JSON.parse(readFileSync(join(modelDir, 'config.json'), 'utf8')) as Record<string, unknown>;
    expect(config).toMatchObject({ hat_trained: true });
    expect(config.hat_dummy_weights).toBeUndefined();
    const decoder = await OnnxDecoder.load(modelDir, { intraOpThreads: 1 });
    try {
      expect(decoder.info.vocabularySize).toBeGreaterThan(151_000);
      const scored = await decoder.score([151644, 872, 198], [9707, 0]);
      for (const token of scored.tokens) expect(Number.isFinite(token.rawLogprob)).toBe(true);
    } finally {
      await decoder.close();
    }
  });

  it("fails the handoff with the trainer's own words when it refuses its config, and `hat runs retry` trains again", async () => {
    await runConfig('train-refused', '{ maxSteps: 1, notATrainerKey: 5 }');
    const events: CommandTrainerEvent[] = [];
    const answering = trainer('train-refused', events);
    try {
      // The executor tells of the failure once the handoff has read it and failed.
      await waitFor(async () => (events.some((event) => event.kind === 'failed') ? true : undefined), 120_000);
      const status = await finished('train-refused');
      expect(status.state).toBe('failed');
      const handoff = status.handoffs?.[0];
      expect(handoff?.state).toBe('failed');
      expect(handoff?.error).toMatch(/^\[TRAINING_REFUSED\] the trainer of handoff sft \(run train-refused\) refused/);
      expect(handoff?.error).toContain('notATrainerKey');
      const shown = await runHatInProcess(env, 'runs', 'show', 'train-refused');
      expect(shown.stdout).toContain('notATrainerKey');
      // The failure was consumed; the log stays beside the request.
      expect(await store.head('runs/train-refused/handoffs/sft/trainer-failure.json')).toBeUndefined();
      expect((await store.getBuffer('runs/train-refused/handoffs/sft/training.log')).toString()).toContain(
        'notATrainerKey',
      );

      const retried = await runHatInProcess(env, 'runs', 'retry', 'train-refused');
      expect(retried.code).toBe(0);
      // Back to waiting, the executor answers it again (and the trainer refuses again: same config).
      await waitFor(
        async () => (events.filter((event) => event.kind === 'failed').length >= 2 ? true : undefined),
        120_000,
      );
      const again = await finished('train-refused');
      expect(again.handoffs?.[0]?.error).toMatch(/TRAINING_REFUSED/);
      expect(events.filter((event) => event.kind === 'started')).toHaveLength(2);
    } finally {
      await answering.stop();
    }
  });

  it('keeps the simulated trainer as an option, labelled: a re-seeded dummy model, simulated: true in the marker and the report', async () => {
    await runConfig('train-simulated', '{}');
    const answering = startSimulatedTrainer(kit.context, {
      runId: 'train-simulated',
      modelCacheDir: join(directory, 'models'),
      storeFor: (rootUri) => (rootUri === root ? store : createArtifactStore(rootUri, kit.env)),
      intervalMs: 200,
    });
    try {
      expect((await finished('train-simulated')).state).toBe('completed');
    } finally {
      await answering.stop();
    }
    const marker = JSON.parse(
      (await store.getBuffer('runs/train-simulated/handoffs/sft/checkpoint.json')).toString('utf8'),
    ) as CheckpointMarker;
    expect(marker).toMatchObject({ simulated: true, registeredBy: 'simulated-trainer' });
    expect(marker.training).toBeUndefined();
    const html = (await store.getBuffer('runs/train-simulated/run-report.html')).toString('utf8');
    expect(html).toContain('<b>Simulated training:</b>');
    expect(html).not.toContain('loss curve of handoff');
  });

  it('hat run --wait trains the handoffs whose executor is command from the waiting process', async () => {
    const tiny =
      '{ maxSteps: 1, model: { layers: 1, hidden: 32, heads: 2, kvHeads: 1, headDim: 16, intermediate: 64 } }';
    const run = await runConfig('train-wait', tiny, ['--wait']);
    expect(run.code).toBe(0);
    expect(run.stderr).toContain('training handoff sft from a new model');
    expect(run.stderr).toMatch(
      /trained handoff sft: sft, 1 steps, .* -> hat-trained-sft-v1 served at http:\/\/127\.0\.0\.1:\d+\/v1/,
    );
    const marker = JSON.parse(
      (await store.getBuffer('runs/train-wait/handoffs/sft/checkpoint.json')).toString('utf8'),
    ) as CheckpointMarker;
    expect(marker).toMatchObject({ simulated: false, registeredBy: 'hat-trainer', model: 'hat-trained-sft-v1' });
  });

  it('the cluster path: the command the templates run writes the marker itself, with the lineage and training summary the run reports', async () => {
    const tiny =
      '{ maxSteps: 1, model: { layers: 1, hidden: 32, heads: 2, kvHeads: 1, headDim: 16, intermediate: 64 } }';
    // executor kubernetes: nothing here starts the trainer; infra/trainer/submit.sh runs this command in a Job.
    await runConfig('train-cluster', tiny, [], 'kubernetes');
    const requestUri = `${root}/runs/train-cluster/handoffs/sft/request.json`;
    await waitFor(
      async () => ((await store.head('runs/train-cluster/handoffs/sft/request.json')) ? true : undefined),
      60_000,
    );
    const trained = spawnSync(
      trainerPython(),
      [
        '-m',
        'hat_trainer',
        'train',
        '--request',
        requestUri,
        '--out',
        join(directory, 'cluster-out'),
        '--register-marker',
      ],
      { cwd: trainerDirectory(), env: { ...process.env, ...env }, encoding: 'utf8' },
    );
    expect([
      trained.status,
      trained.stderr
        .split('\n')
        .filter((line) => line.startsWith('['))
        .join('\n'),
    ]).toEqual([0, '']);
    const status = await finished('train-cluster');
    expect([status.state, status.error]).toEqual(['completed', undefined]);
    const marker = JSON.parse(
      (await store.getBuffer('runs/train-cluster/handoffs/sft/checkpoint.json')).toString('utf8'),
    ) as CheckpointMarker;
    expect(marker).toMatchObject({
      simulated: false,
      registeredBy: 'hat-trainer',
      modelDir: join(directory, 'cluster-out', 'onnx'),
      lineage: { requestUri, requestSha256: expect.stringMatching(/^[0-9a-f]{64}$/) },
      training: { objective: 'sft', steps: 1, reportUri: `${root}/runs/train-cluster/handoffs/sft/training.json` },
    });
    const manifest = runManifestSchema.parse(
      JSON.parse((await store.getBuffer('runs/train-cluster/run-manifest.json')).toString('utf8')),
    );
    expect(manifest.handoffs?.[0]?.checkpoint?.training?.lossCurve).toHaveLength(1);
  });
});
