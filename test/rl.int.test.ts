import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { enqueueRun } from '../queues/runs/flows';
import { watchRun } from '../queues/runs/run-control';
import { planRun } from '../queues/runs/run-config';
import { runStageLocally } from '../queues/stage-kit/run-stage-locally';
import type { ArtifactStore } from '../shared/artifacts/artifact-store';
import { createArtifactStore, openArtifactObject } from '../shared/artifacts/create-artifact-store';
import { FileArtifactStore } from '../shared/artifacts/file-artifact-store';
import { readJsonl } from '../shared/artifacts/jsonl-reader';
import { startLocalS3Server } from '../shared/artifacts/local-s3-server';
import { readManifest } from '../shared/artifacts/manifest';
import { harnessHash } from '../shared/harness/harness-hash';
import { loadHarness } from '../shared/harness/load-harness';
import { sampleHarnessDirectory } from '../shared/harness/sample-harness';
import { silentLogger } from '../shared/log/logger';
import type { ModelClient } from '../shared/models/model-client';
import { StochasticPolicy } from '../shared/simulator/policies/stochastic-policy';
import type { EpisodeRecord } from '../workers/rl/episode-records';
import { rlGroupSchema } from '../workers/rl/group-plan';
import { buildStageDeps } from '../queues/stage-kit/stage-execution';
import { planRl, rlStage } from '../workers/rl/processor';
import { rlInputSchema, type RlInputConfig, type RlOutput } from '../workers/rl/rl-contract';
import { episodeSeedOf, groupHarnesses, runRlPart, samplingSeedOf } from '../workers/rl/rl-part';
import type { RlStats } from '../workers/rl/rl-stats';
import { runHatInProcess } from './support/hat-in-process';
import {
  OpenAiTestServer,
  type RecordedRequest,
  type ScriptedChatResponse,
  type ServerFault,
} from './support/openai-test-server';
import { createQueueTestKit, type QueueTestKit } from './support/queue-test-kit';

/**
 * The rl stage against a served policy: the local OpenAI-compatible test server plays the
 * checkpoint. Its responder is a reasonable policy: the simulator's expert with seeded mistakes,
 * one per (group, harness), found from the episode's sampling seed and the group plan the stage
 * wrote (it rebuilds each group's HSA variant the way the stage does).
 */

/** `step`: which policy call of its episode a request is (1 + the assistant turns it carries). */
type Fault = (request: RecordedRequest, step: number) => ServerFault | undefined;

interface PolicyServer {
  server: OpenAiTestServer;
  /** Chat requests per episode, by sampling seed. */
  callsBySeed: Map<number, number>;
}

async function startPolicyServer(
  locate: () => { store: ArtifactStore; key: string },
  config: RlInputConfig,
  fault?: Fault,
): Promise<PolicyServer> {
  const callsBySeed = new Map<number, number>();
  let policies: Promise<Map<number, ModelClient>> | undefined;
  // Built once, on the first request: the group plan exists by then (plan runs before any part).
  const buildPolicies = async (): Promise<Map<number, ModelClient>> => {
    const input = rlInputSchema.parse(config);
    const { store, key } = locate();
    const groups = [];
    for await (const group of readJsonl(store, key, { schema: rlGroupSchema })) groups.push(group);
    const canonical = await loadHarness(sampleHarnessDirectory());
    const harnesses = groupHarnesses(groups, canonical, harnessHash(canonical), { seed: input.seed!, config: input });
    const bySeed = new Map<number, ModelClient>();
    for (const [position, group] of groups.entries()) {
      const policy = new StochasticPolicy({
        seed: 'served',
        tasks: [group.task],
        harnesses: [harnesses[position].harness],
      });
      for (let sample = 0; sample < input.groupSize; sample++)
        bySeed.set(samplingSeedOf(episodeSeedOf(input.seed!, group.groupIndex, sample)), policy);
    }
    return bySeed;
  };
  const policyFor = async (seed: number): Promise<ModelClient> => {
    const policy = (await (policies ??= buildPolicies())).get(seed);
    if (!policy) throw new Error(`no episode has sampling seed ${seed}`);
    return policy;
  };
  const server = await OpenAiTestServer.start({
    models: ['policy-checkpoint'],
    responder: async (request): Promise<ScriptedChatResponse | { fault: ServerFault }> => {
      const seed = request.body.seed as number;
      callsBySeed.set(seed, (callsBySeed.get(seed) ?? 0) + 1);
      const step =
        1 + (request.body.messages as Array<{ role: string }>).filter((message) => message.role === 'assistant').length;
      const injected = fault?.(request, step);
      if (injected) return { fault: injected };
      const response = await (
        await policyFor(seed)
      ).chat({ messages: request.body.messages, tools: request.body.tools, seed });
      const { content, tool_calls: toolCalls } = response.message;
      return {
        ...(content ? { content } : {}),
        ...(toolCalls?.length
          ? {
              toolCalls: toolCalls.map((call) => ({
                id: call.id,
                name: call.function.name,
                arguments: call.function.arguments,
              })),
            }
          : {}),
      };
    },
  });
  return { server, callsBySeed };
}

async function readRecords(store: ArtifactStore, manifestKey: string): Promise<EpisodeRecord[]> {
  const manifest = await readManifest(store, manifestKey);
  const records: EpisodeRecord[] = [];
  for (const object of manifest.objects.filter(
    (entry) => entry.key.endsWith('.jsonl.gz') && !entry.key.endsWith('groups.jsonl.gz'),
  )) {
    for await (const record of readJsonl<EpisodeRecord>(store, object.key)) records.push(record);
  }
  return records;
}

const servers: OpenAiTestServer[] = [];
const directories: string[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
  await Promise.all(directories.splice(0).map((directory) => rm(directory, { recursive: true, force: true })));
});

describe('rl stage through queues (real Redis) against an OpenAI-compatible policy server', () => {
  let kit: QueueTestKit;
  beforeEach(async () => {
    kit = await createQueueTestKit();
  });
  afterEach(async () => {
    await kit.cleanup();
  });

  it('plays groups through the served policy, writes Parquet that DuckDB reads back, and records the real policy', async () => {
    let config: RlInputConfig = {
      seed: 'q',
      generate: { count: 8, seed: 'q' },
      groups: 4,
      groupSize: 3,
      groupsPerPart: 2,
      canonicalShare: 0.5,
    };
    const policy = await startPolicyServer(() => ({ store: kit.store, key: 'runs/rl-q/rl/groups.jsonl.gz' }), config);
    servers.push(policy.server);
    config = {
      ...config,
      policy: { adapter: 'openai', baseUrl: policy.server.baseUrl, model: 'policy-checkpoint', maxRetries: 0 },
    };
    await kit.startWorkers({ queues: ['rl', 'runs'] });
    await enqueueRun(
      kit.context,
      planRun({ runId: 'rl-q', stages: { rl: config } }, { env: kit.env, now: new Date('2025-03-01T00:00:00Z') }),
    );
    const status = await watchRun(kit.context, 'rl-q', { intervalMs: 100 });
    expect(status.state).toBe('completed');
    expect(status.stages).toEqual([
      expect.objectContaining({ name: 'rl', state: 'completed', partsDone: 2, partsTotal: 2 }),
    ]);

    const manifestKey = 'runs/rl-q/rl/manifest.json';
    const records = await readRecords(kit.store, manifestKey);
    expect(records).toHaveLength(12);
    expect(records.every((record) => record.status === 'ok')).toBe(true);
    expect(
      records.every(
        (record) =>
          (record.metadata.policy as { provider: string; id: string; simulated: boolean }).simulated === false,
      ),
    ).toBe(true);
    // Every episode its own sampling seed; each seed's calls are one episode's steps.
    expect(policy.callsBySeed.size).toBe(12);
    const steps = records.reduce((sum, record) => sum + (record.metadata.steps as number), 0);
    expect([...policy.callsBySeed.values()].reduce((sum, count) => sum + count, 0)).toBe(steps);
    expect(new Set(records.map((record) => record.metadata.sampling_seed))).toEqual(new Set(policy.callsBySeed.keys()));
    // The manifest comes after every object it lists.
    const manifest = await readManifest(kit.store, manifestKey);
    const manifestAt = kit.putOrder.indexOf(manifestKey);
    expect(Math.max(...manifest.objects.map((object) => kit.putOrder.indexOf(object.key)))).toBeLessThan(manifestAt);

    const stats = JSON.parse((await kit.store.getBuffer('runs/rl-q/rl/stats.json')).toString('utf8')) as RlStats;
    expect(stats.policy).toEqual({
      provider: 'openai',
      modelId: 'policy-checkpoint',
      simulated: false,
      tokenExact: false,
      logprobDistribution: { kind: 'raw', temperature: 1, topP: 1, topK: 0, engine: 'openai' },
    });
    // The chat endpoint was asked for logprobs; the test server gives them with answer text only, so
    // turns that only call tools come without (counted, not fatal).
    expect(stats.chatLogprobs!.turnsWithLogprobs).toBeGreaterThan(0);
    expect(stats.chatLogprobs!.turnsWithLogprobs).toBeLessThan(stats.chatLogprobs!.turns);
    expect(stats.chatLogprobs!.refusedEpisodes).toBe(0);
    expect(stats.counts.groups).toMatchObject({ played: 4, canonical: 2, variant: 2, kept: 4 });

    // An independent reader sees the same episodes, with consistent token views.
    const instance = await DuckDBInstance.create(':memory:');
    const connection = await instance.connect();
    const glob = join(kit.artifactsDirectory, 'runs/rl-q/rl/part-*.parquet');
    const result = await connection.runAndReadAll(
      `select group_index, count(*) as episodes, sum(advantage) as advantage_sum, bool_and(len(tokens) = prompt_length + response_length) as lengths_ok,
              bool_and(len(loss_mask) = response_length) as mask_ok, sum(list_sum(loss_mask)) as trained, min(reward) as low, max(reward) as high,
              count(distinct harness_hash) as harnesses, bool_and(canonical_harness = (variant_hash is null)) as lineage_ok
       from read_parquet('${glob}') group by group_index order by group_index`,
    );
    const rows = result.getRowObjectsJson() as Array<Record<string, unknown>>;
    expect(rows.map((row) => row.group_index)).toEqual([0, 1, 2, 3]);
    for (const row of rows) {
      expect(row).toMatchObject({ episodes: '3', lengths_ok: true, mask_ok: true, harnesses: '1', lineage_ok: true });
      expect(Math.abs(Number(row.advantage_sum))).toBeLessThan(1e-9);
    }
    expect(rows.reduce((sum, row) => sum + Number(row.trained), 0)).toBe(stats.counts.tokens.trained);
    const first = (
      await connection.runAndReadAll(
        `select prompt, reward, metadata->>'$.task_id' as task from read_parquet('${glob}') where "index" = 0`,
      )
    ).getRowObjectsJson()[0] as Record<string, string | number>;
    const firstRecord = records.find((record) => record.index === 0)!;
    expect(first).toEqual({ prompt: firstRecord.prompt, reward: firstRecord.reward, task: firstRecord.task_id });
    expect(JSON.parse(first.prompt as string)[0].role).toBe('system');
    connection.closeSync();
  });
});

describe('rl stage: policy errors mid-episode', () => {
  async function runWithFaults(groupsWithFailures: 'keep' | 'drop') {
    const directory = await mkdtemp(join(tmpdir(), 'hat-rl-errors-'));
    directories.push(directory);
    const store = new FileArtifactStore(directory);
    const base: RlInputConfig = {
      seed: 'faults',
      generate: { count: 6, seed: 'faults', categoryWeights: { chit_chat: 0, out_of_catalog: 0, compliance_trap: 0 } },
      groups: 4,
      groupSize: 2,
      canonicalShare: 0,
      groupsWithFailures,
    };
    // The second call of episode (group 1, sample 0) fails with HTTP 500 on every attempt; that of (group 2, sample 1) with HTTP 400;
    // the first call of (group 3, sample 0) gets no answer within the episode's time limit.
    const serverErrorSeed = samplingSeedOf(episodeSeedOf('faults', 1, 0));
    const badRequestSeed = samplingSeedOf(episodeSeedOf('faults', 2, 1));
    const slowSeed = samplingSeedOf(episodeSeedOf('faults', 3, 0));
    const policy = await startPolicyServer(
      () => ({ store, key: 'groups.jsonl.gz' }),
      base,
      (request, step) => {
        if (request.body.seed === slowSeed) return { kind: 'slow-first-byte', delayMs: 60_000 };
        if (step !== 2) return undefined;
        if (request.body.seed === serverErrorSeed) return { kind: 'status', status: 500, message: 'engine crashed' };
        if (request.body.seed === badRequestSeed) return { kind: 'status', status: 400, message: 'prompt too long' };
        return undefined;
      },
    );
    servers.push(policy.server);
    const config = {
      ...base,
      episodeTimeoutMs: 4_000,
      policy: {
        adapter: 'openai',
        baseUrl: policy.server.baseUrl,
        model: 'policy-checkpoint',
        maxRetries: 2,
        retryInitialDelayMs: 1,
        retryMaxDelayMs: 2,
      },
    };
    const result = await runStageLocally(rlStage, config, {
      store,
      openObject: (uri) => openArtifactObject(uri),
      logger: silentLogger(),
      seed: 'unused',
      concurrency: 1,
    });
    const stats = JSON.parse((await store.getBuffer('stats.json')).toString('utf8')) as RlStats;
    return { output: result.output as RlOutput, records: await readRecords(store, 'manifest.json'), stats, policy };
  }

  it('records a persistent 500 and a 400 on the second call, and an episode timeout, on their episodes without failing the stage', async () => {
    const { output, records, stats, policy } = await runWithFaults('keep');
    expect(output.groupsKept).toBe(4);
    const serverError = records.find((record) => record.group_index === 1 && record.sample_index === 0)!;
    const badRequest = records.find((record) => record.group_index === 2 && record.sample_index === 1)!;
    expect(serverError).toMatchObject({ status: 'model_error', advantage: 0 });
    expect(serverError.status_reason).toMatch(/^\[MODEL_(UNAVAILABLE|SERVER_ERROR)\].*HTTP 500.*engine crashed/);
    expect(badRequest).toMatchObject({ status: 'model_error', advantage: 0 });
    expect(badRequest.status_reason).toMatch(/^\[MODEL_BAD_REQUEST\].*HTTP 400.*prompt too long/);
    // The failed episodes keep their first step (the tool call) as tokens, none of them trained.
    for (const failed of [serverError, badRequest]) {
      expect(failed.response_length).toBeGreaterThan(0);
      expect(failed.loss_mask.every((bit) => bit === 0)).toBe(true);
      expect(failed.metadata.steps).toBe(1);
    }
    // The 500 was retried (3 attempts of call 2), the 400 was not.
    expect(policy.callsBySeed.get(samplingSeedOf(episodeSeedOf('faults', 1, 0)))).toBe(4);
    expect(policy.callsBySeed.get(samplingSeedOf(episodeSeedOf('faults', 2, 1)))).toBe(2);
    const timedOut = records.find((record) => record.group_index === 3 && record.sample_index === 0)!;
    expect(timedOut).toMatchObject({ status: 'timeout', advantage: 0, tokens: [], metadata: { steps: 0 } });
    expect(timedOut.status_reason).toMatch(/RL_EPISODE_TIMEOUT|abort/i);
    expect(
      records
        .filter((record) => record.status !== 'model_error' && record.status !== 'timeout')
        .every((record) => record.status === 'ok'),
    ).toBe(true);
    expect(stats.counts.episodes.byStatus).toEqual({ model_error: 2, ok: 5, timeout: 1 });
    expect(stats.counts.groups).toMatchObject({ played: 4, withFailures: 3, withFailuresDropped: 0, kept: 4 });
    expect(stats.counts.episodes.scored).toBe(5);
  });

  it('drops the groups with failures when told to, and counts them', async () => {
    const { output, records, stats } = await runWithFaults('drop');
    expect(output.groupsKept).toBe(1);
    expect(new Set(records.map((record) => record.group_index))).toEqual(new Set([0]));
    expect(stats.counts.groups).toMatchObject({ played: 4, withFailures: 3, withFailuresDropped: 3, kept: 1 });
  });

  it('fails the part as transient when most episodes hit endpoint errors (the endpoint looks down)', async () => {
    const server = await OpenAiTestServer.start({
      responder: () => ({ fault: { kind: 'status', status: 503, message: 'overloaded' } }),
    });
    servers.push(server);
    const directory = await mkdtemp(join(tmpdir(), 'hat-rl-down-'));
    directories.push(directory);
    const deps = buildStageDeps({
      store: new FileArtifactStore(directory),
      outputPrefix: '',
      openObject: (uri) => openArtifactObject(uri),
      runId: 'down',
      seed: 'down',
      stage: 'rl',
      attempt: 1,
      logger: silentLogger(),
      clock: { now: () => Date.now() },
      progress: () => undefined,
      signal: new AbortController().signal,
      services: {},
    });
    const input = rlInputSchema.parse({
      generate: { count: 2, seed: 'down' },
      groups: 2,
      groupSize: 2,
      policy: { adapter: 'openai', baseUrl: server.baseUrl, model: 'm', maxRetries: 0 },
    });
    const [part] = await planRl(input, deps);
    const failure = runRlPart(part, deps);
    await expect(failure).rejects.toThrow(/^\[RL_POLICY_UNAVAILABLE\] 4 of 4 episodes .*HTTP 503.*overloaded/);
    await expect(failure).rejects.toMatchObject({ retryable: true });
    expect(await deps.store.head('part-00000.parquet')).toBeUndefined();
  });
});

it('`hat stage rl` runs the stage in-process onto a local S3-compatible server', async () => {
  const server = await startLocalS3Server({ bucket: 'rl-cli' });
  const directory = await mkdtemp(join(tmpdir(), 'hat-rl-cli-'));
  directories.push(directory);
  try {
    const configFile = join(directory, 'rl.yaml');
    await writeFile(configFile, 'generate: { count: 4, seed: cli }\ngroups: 3\ngroupSize: 2\n');
    const out = `s3://${server.bucket}/rl-cli`;
    const result = await runHatInProcess(
      { ...process.env, ...server.env, S3_FORCE_PATH_STYLE: 'true', HAT_LOG_LEVEL: 'silent' },
      'stage',
      'rl',
      '--config',
      configFile,
      '--out',
      out,
      '--seed',
      '5',
      '--json',
    );
    expect(result.stderr).not.toMatch(/hat: /);
    expect(result.code).toBe(0);
    const output = JSON.parse(result.stdout) as RlOutput;
    expect(output).toMatchObject({
      groups: 3,
      episodes: 6,
      simulatedPolicy: true,
      manifestUri: `${out}/manifest.json`,
    });
    const store = createArtifactStore(out, { ...server.env, S3_FORCE_PATH_STYLE: 'true' });
    try {
      expect((await readRecords(store, 'manifest.json')).length).toBe(6);
    } finally {
      await store.close();
    }
  } finally {
    await server.stop();
  }
});
