import type { StageDeps } from '../../queues/stage-kit/define-stage';
import { writeJsonl } from '../../shared/artifacts/jsonl-writer';
import { writeParquet } from '../../shared/artifacts/parquet-codec';
import { HatError, TransientError } from '../../shared/errors';
import { canonicalJson, sha256Hex } from '../../shared/hash/hash';
import { harnessHash } from '../../shared/harness/harness-hash';
import type { Harness } from '../../shared/harness/harness-types';
import { sampleHarnessDirectory } from '../../shared/harness/sample-harness';
import { withChat, type ModelClient } from '../../shared/models/model-client';
import { createModelClient, createTokenSampler, type TokenModelDependencies } from '../../shared/models/model-registry';
import {
  checkRolloutLogprobs,
  reportedDistribution,
  type LogprobDistribution,
  type SamplingOfTurn,
} from '../../shared/models/token-exact/logprob-distribution';
import { TokenExactEpisode, type TokenExactEpisodeView } from '../../shared/models/token-exact/token-exact-episode';
import type { TokenSampler } from '../../shared/models/token-exact/token-sampler';
import { turnTextParserFor } from '../../shared/models/token-exact/turn-text-parser';
import { runEpisode } from '../../shared/simulator/agent-loop';
import { scriptedServiceKeys } from '../../shared/simulator/policies/scripted-adapter';
import { createModelViewer, createScriptedViewer, type Viewer } from '../../shared/simulator/viewer/viewer';
import { loadTokenizerSource } from '../../queues/stage-kit/load-tokenizer-source';
import type { Trajectory } from '../../shared/trajectory/trajectory';
import { readRecordRange } from '../../queues/stage-kit/stage-inputs';
import { addChatLogprobs, ChatLogprobsRequester, chatLogprobsMetadata } from './chat-policy-logprobs';
import { loadHarnessFromUri } from '../../queues/stage-kit/load-harness-from-uri';
import {
  buildEpisodeRecord,
  episodeColumnsFor,
  episodeTokenView,
  isScored,
  renderMoment,
  RL_EPISODE_SCHEMA_VERSION,
  sampledTokenView,
  type EpisodeRecord,
  type PolicyKind,
  type TokenView,
} from './episode-records';
import { groupAdvantages } from './group-advantages';
import { groupVariant, type GroupHarness } from './group-harness';
import { rlGroupSchema, type RlGroup } from './group-plan';
import {
  isTokenExactPolicy,
  type RlInput,
  type RlPartInput,
  type RlPartOutput,
  type RlPartTiming,
} from './rl-contract';
import { addPassAtK, addToBucket, addTokenExact, emptyBucket, emptyTotals, type RlTotals } from './rl-stats';

/** The canonical harness a config names (default: the sample live-host harness). */
export function harnessUriOf(config: Pick<RlInput, 'harness'>): string {
  return config.harness ?? sampleHarnessDirectory();
}

/** Seed of episode `sampleIndex` of group `groupIndex`: independent of parts, batches and concurrency. */
export function episodeSeedOf(seed: string, groupIndex: number, sampleIndex: number): string {
  return `${seed}/rl/group-${groupIndex}/episode-${sampleIndex}`;
}

/** The integer sampling seed sent with an episode's policy calls (OpenAI `seed`: a 31-bit integer). */
export function samplingSeedOf(episodeSeed: string): number {
  return Number.parseInt(sha256Hex(episodeSeed).slice(0, 8), 16) & 0x7fffffff;
}

/** The sampling of every token-exact turn: the config's settings, engine defaults for the rest (temperature 1, no truncation). */
export function samplingOfTurn(settings: RlInput['sampling']): SamplingOfTurn {
  return {
    temperature: settings.temperature ?? 1,
    topP: settings.topP ?? 1,
    topK: settings.topK !== undefined && settings.topK > 0 ? settings.topK : 0,
  };
}

/** A token-exact policy's logprobs must be of the distribution tokens are drawn from (importance ratios); refused otherwise. */
export function checkTokenExactPolicy(sampler: TokenSampler, config: Pick<RlInput, 'sampling'>): LogprobDistribution {
  return checkRolloutLogprobs('rl.policy', sampler, samplingOfTurn(config.sampling));
}

/** The token sampler of a policy its adapter samples token-exact (undefined: it is played through chat). */
export function tokenExactPolicyOf(
  config: Pick<RlInput, 'policy' | 'modelCacheDir'>,
  dependencies: TokenModelDependencies,
): TokenSampler | undefined {
  if (!isTokenExactPolicy(config.policy)) return undefined;
  return createTokenSampler(config.policy, {
    ...dependencies,
    ...(config.modelCacheDir !== undefined ? { modelCacheDir: config.modelCacheDir } : {}),
    configPath: 'rl.policy',
  });
}

/** The harness of each group: the canonical one, or the group's own fresh variant. */
export function groupHarnesses(
  groups: readonly RlGroup[],
  canonical: Harness,
  canonicalHash: string,
  part: Pick<RlPartInput, 'seed' | 'config'>,
): GroupHarness[] {
  return groups.map((group) =>
    group.canonical
      ? { harness: canonical, hash: canonicalHash, canonical: true }
      : groupVariant(canonical, group.groupIndex, part.seed, part.config.families),
  );
}

/**
 * The policy client of each harness (by harness hash). A served checkpoint needs one client for
 * everything; the scripted policies get one per harness, because the scripted expert tells
 * harnesses apart by their tool names and variants that only restructure the prompt, hooks or
 * skills keep the canonical tool names (one shared expert would answer them under the wrong
 * hook constraints).
 */
function policiesByHarness(
  config: RlInput,
  groups: readonly RlGroup[],
  harnesses: readonly GroupHarness[],
  create: (tasks: RlGroup['task'][], harness: Harness) => ModelClient,
): Map<string, ModelClient> {
  const policies = new Map<string, ModelClient>();
  if (config.policy.adapter !== 'scripted') {
    const shared = create([], harnesses[0].harness);
    for (const entry of harnesses) policies.set(entry.hash, shared);
    return policies;
  }
  for (const entry of harnesses) {
    if (policies.has(entry.hash)) continue;
    const tasks = groups.filter((_, index) => harnesses[index].hash === entry.hash).map((group) => group.task);
    policies.set(entry.hash, create(tasks, entry.harness));
  }
  return policies;
}

/** A policy that records how long its calls take (the stage's overhead is measured against it). */
function timedPolicy(client: ModelClient, timing: RlPartTiming): ModelClient {
  return withChat(client, async (request) => {
    const started = performance.now();
    try {
      return await client.chat(request);
    } finally {
      timing.policyMs += performance.now() - started;
      timing.steps += 1;
    }
  });
}

/** Runs `work` over `items`, at most `limit` at once; the first failure stops new starts and is thrown. */
async function forEachConcurrently<T>(
  items: readonly T[],
  limit: number,
  work: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  let failed = false;
  const lane = async (): Promise<void> => {
    while (!failed && next < items.length) {
      const item = items[next++];
      try {
        await work(item);
      } catch (error) {
        failed = true;
        throw error;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
}

async function readGroupSlice(part: RlPartInput, deps: StageDeps): Promise<RlGroup[]> {
  const { records, sha256 } = await readRecordRange(
    deps.openObject,
    part.groups.uri,
    rlGroupSchema,
    part.groups.start,
    part.groups.start + part.groups.count,
  );
  if (sha256 !== part.groups.sha256) {
    throw new HatError(
      'RL_PLAN_CHANGED',
      `${part.groups.uri} changed after the stage was planned (sha256 differs); rerun the whole stage`,
    );
  }
  return records;
}

interface PlayedGroup {
  group: RlGroup;
  harness: GroupHarness;
  trajectories: Trajectory[];
  samplingSeeds: number[];
  /** Token-exact policies: each episode's ids as sampled. */
  sampled: TokenExactEpisodeView[];
}

/**
 * One part: reads its slice of the group plan, builds each group's harness, plays G episodes
 * per group (at most `episodeConcurrency` at once), scores, computes advantages, builds and
 * checks the token views, and writes the kept groups' records as Parquet and gzip JSONL.
 */
export async function runRlPart(part: RlPartInput, deps: StageDeps): Promise<RlPartOutput> {
  const startedAt = performance.now();
  const config = part.config;
  const timing: RlPartTiming = {
    partMs: 0,
    episodeMs: 0,
    policyMs: 0,
    tokenViewMs: 0,
    variantMs: 0,
    steps: 0,
    episodes: 0,
  };
  const groups = await readGroupSlice(part, deps);
  const canonical = await loadHarnessFromUri(harnessUriOf(config), deps.openObject);
  const canonicalHash = harnessHash(canonical);
  if (canonicalHash !== part.harnessHash) {
    throw new HatError(
      'RL_HARNESS_CHANGED',
      `the harness at ${harnessUriOf(config)} changed after the stage was planned (hash ${canonicalHash.slice(0, 12)}, planned ${part.harnessHash.slice(0, 12)}); rerun the whole stage`,
    );
  }
  const variantsStarted = performance.now();
  const harnesses = groupHarnesses(groups, canonical, canonicalHash, part);
  timing.variantMs = performance.now() - variantsStarted;
  const tokenizer = await loadTokenizerSource(config.tokenizer, deps.openObject);
  const clientDependencies = (
    configPath: string,
    tasks: readonly RlGroup['task'][],
    simulatorHarnesses: readonly Harness[],
  ) => ({
    logger: deps.logger,
    random: () => deps.rng.next(),
    configPath,
    // The scripted policies play simulator tasks only: they are handed the tasks and harnesses they play.
    services: {
      ...deps.services,
      [scriptedServiceKeys.tasks]: tasks,
      [scriptedServiceKeys.harnesses]: simulatorHarnesses,
    },
  });
  const sampler = tokenExactPolicyOf(config, { logger: deps.logger, random: () => deps.rng.next() });
  const distribution = sampler ? checkTokenExactPolicy(sampler, config) : undefined;
  const turnParser = sampler ? turnTextParserFor(tokenizer, sampler.toolCallParser ?? 'auto') : undefined;
  // A token-exact policy gets one TokenExactEpisode per episode (below): the token sequence is per episode.
  // Chat-completions policies ask for logprobs on every call (not token-exact, but recorded).
  const chatLogprobs = !sampler && config.policy.adapter !== 'scripted' ? new ChatLogprobsRequester() : undefined;
  const policies = sampler
    ? new Map<string, ModelClient>()
    : policiesByHarness(config, groups, harnesses, (tasks, harness) => {
        const client = createModelClient(config.policy, clientDependencies('rl.policy', tasks, [harness]));
        return timedPolicy(chatLogprobs ? chatLogprobs.wrap(client) : client, timing);
      });
  const viewerClient =
    config.viewer.kind === 'model'
      ? createModelClient(config.viewer.model, clientDependencies('rl.viewer.model', [], []))
      : undefined;
  const played: PlayedGroup[] = groups.map((group, position) => ({
    group,
    harness: harnesses[position],
    trajectories: [],
    samplingSeeds: [],
    sampled: [],
  }));
  try {
    const viewerFor = (groupIndex: number, sampleIndex: number): Viewer | undefined => {
      const viewer = config.viewer;
      if (viewer.kind === 'scripted') {
        return createScriptedViewer({
          seed: `${part.seed}/rl/viewer/group-${groupIndex}${viewer.perEpisode ? `/episode-${sampleIndex}` : ''}`,
          paraphraseRate: viewer.paraphraseRate,
        });
      }
      if (viewer.kind === 'model')
        return createModelViewer({ client: viewerClient!, ...(viewer.sampling ? { sampling: viewer.sampling } : {}) });
      return undefined;
    };
    const episodes = played.flatMap((entry) =>
      Array.from({ length: config.groupSize }, (_, sampleIndex) => ({ entry, sampleIndex })),
    );
    const total = episodes.length;
    deps.progress({ done: 0, total, message: 'playing episodes' });
    await forEachConcurrently(episodes, config.episodeConcurrency, async ({ entry, sampleIndex }) => {
      const seed = episodeSeedOf(part.seed, entry.group.groupIndex, sampleIndex);
      const samplingSeed = samplingSeedOf(seed);
      const deadline = new AbortController();
      const timer = setTimeout(
        () =>
          deadline.abort(
            new HatError('RL_EPISODE_TIMEOUT', `episode over episodeTimeoutMs (${config.episodeTimeoutMs} ms)`),
          ),
        config.episodeTimeoutMs,
      );
      const viewer = viewerFor(entry.group.groupIndex, sampleIndex);
      const episode = sampler
        ? new TokenExactEpisode({
            sampler,
            tokenizer,
            parse: turnParser!.parse,
            sampling: samplingOfTurn(config.sampling),
            ...(config.sampling.maxTokens !== undefined ? { maxTokens: config.sampling.maxTokens } : {}),
            seed: samplingSeed,
            ...(config.enableThinking !== undefined ? { enableThinking: config.enableThinking } : {}),
            now: renderMoment,
          })
        : undefined;
      const episodeStarted = performance.now();
      try {
        entry.trajectories[sampleIndex] = await runEpisode({
          policy: episode ? timedPolicy(episode, timing) : policies.get(entry.harness.hash)!,
          harness: entry.harness.harness,
          harnessHash: entry.harness.hash,
          ...(entry.harness.variant ? { variant: entry.harness.variant } : {}),
          task: entry.group.task,
          maxSteps: config.maxStepsPerTurn,
          ...(config.maxTurns !== undefined ? { maxTurns: config.maxTurns } : {}),
          ...(viewer ? { viewer } : {}),
          sampling: { ...config.sampling, seed: samplingSeed },
          sampleIndex,
          seed,
          ...(config.rewardWeights ? { rewardWeights: config.rewardWeights } : {}),
          signal: AbortSignal.any([deps.signal, deadline.signal]),
          meta: { groupIndex: entry.group.groupIndex },
        });
      } finally {
        clearTimeout(timer);
        timing.episodeMs += performance.now() - episodeStarted;
      }
      // A job handed back (shutdown, cancel) is not an episode timeout: stop, the part reruns.
      if (deps.signal.aborted)
        throw deps.signal.reason instanceof Error
          ? deps.signal.reason
          : new TransientError('RL_ABORTED', 'the rl part was stopped (job cancelled or worker shutting down)');
      entry.samplingSeeds[sampleIndex] = samplingSeed;
      if (episode) {
        const trajectory = entry.trajectories[sampleIndex];
        const viewStarted = performance.now();
        entry.sampled[sampleIndex] = episode.view(trajectory.messages, trajectory.tools);
        timing.tokenViewMs += performance.now() - viewStarted;
      }
      timing.episodes += 1;
      deps.progress({ done: timing.episodes, total, message: 'playing episodes' });
      // Scripted policies answer without I/O: yield so the job lock can be renewed between episodes.
      await new Promise((resolve) => setImmediate(resolve));
    });
  } finally {
    for (const policy of new Set(policies.values())) await policy.close?.();
    await viewerClient?.close?.();
    await sampler?.close();
  }
  checkPolicyErrors(played, config);

  const totals = emptyTotals(config.groupSize);
  const records: EpisodeRecord[] = [];
  const viewOf = (trajectory: Trajectory, sampled: TokenExactEpisodeView | undefined): TokenView => {
    if (sampled) return sampledTokenView(tokenizer, sampled);
    const viewStarted = performance.now();
    const view = episodeTokenView(tokenizer, trajectory, config.enableThinking);
    timing.tokenViewMs += performance.now() - viewStarted;
    return view;
  };
  const policyKind: PolicyKind = sampler ? 'token-exact' : config.policy.adapter === 'scripted' ? 'scripted' : 'chat';
  const chatDistribution = chatLogprobs
    ? reportedDistribution(config.policy.adapter, config.chatLogprobsMode, samplingOfTurn(config.sampling))
    : undefined;
  const chat =
    chatLogprobs && chatDistribution ? { distribution: chatDistribution, refusal: chatLogprobs.refusal } : undefined;
  for (const entry of played)
    records.push(
      ...scoreGroup(entry, config, totals, tokenizer.fingerprint, viewOf, policyKind, turnParser?.name, chat),
    );

  const name = deps.part?.id ?? `part-${String(part.index).padStart(5, '0')}`;
  const first = policies.values().next().value;
  const policyInfo: RlPartOutput['policy'] = sampler
    ? {
        provider: sampler.engine,
        modelId: sampler.modelId,
        simulated: sampler.dummyWeights,
        tokenExact: true,
        ...(distribution ? { logprobDistribution: distribution } : {}),
      }
    : {
        provider: first!.provider,
        modelId: first!.modelId,
        simulated: first!.simulated ?? false,
        ...(policyKind === 'chat' ? { tokenExact: false } : {}),
        ...(chatDistribution ? { logprobDistribution: chatDistribution } : {}),
      };
  const parquet = await writeParquet(
    deps.store,
    deps.output.key(`${name}.parquet`),
    episodeColumnsFor(policyKind),
    records as unknown as Record<string, unknown>[],
    {
      metadata: {
        schema_version: String(RL_EPISODE_SCHEMA_VERSION),
        tokenizer_fingerprint: tokenizer.fingerprint,
        chat_template_hash: tokenizer.templateHash,
        policy: canonicalJson(policyInfo),
        group_size: String(config.groupSize),
        advantage: canonicalJson(config.advantage),
      },
    },
  );
  const jsonl = await writeJsonl(deps.store, deps.output.key(`${name}.jsonl.gz`), records);
  const ref = (info: { key: string; uri: string; sha256: string; bytes: number; records: number }) => ({
    key: info.key,
    uri: info.uri,
    sha256: info.sha256,
    bytes: info.bytes,
    records: info.records,
  });
  timing.partMs = performance.now() - startedAt;
  return {
    index: part.index,
    parquet: ref(parquet),
    jsonl: ref(jsonl),
    totals: totals as unknown as Record<string, unknown>,
    policy: policyInfo,
    tokenizer: { name: tokenizer.name, fingerprint: tokenizer.fingerprint, templateHash: tokenizer.templateHash },
    timing,
  };
}

/** Too many endpoint failures mean the endpoint is down, not that the policy is bad: fail the part so it is retried later. */
function checkPolicyErrors(played: readonly PlayedGroup[], config: RlInput): void {
  const trajectories = played.flatMap((entry) => entry.trajectories);
  const failed = trajectories.filter(
    (trajectory) => trajectory.status === 'model_error' || trajectory.status === 'timeout',
  );
  if (failed.length > 0 && failed.length / trajectories.length > config.maxPolicyErrorShare) {
    throw new TransientError(
      'RL_POLICY_UNAVAILABLE',
      `${failed.length} of ${trajectories.length} episodes of this part ended in model_error or timeout (more than maxPolicyErrorShare ${config.maxPolicyErrorShare}); first: ${failed[0].statusReason ?? failed[0].status}. Check the policy endpoint; the part is retried`,
    );
  }
}

/**
 * Advantages, token views, records and totals of one played group. The group is written unless
 * it is zero-variance or has a failed episode and the config drops such groups; it is counted
 * either way, and its scored rewards always enter the reward statistics.
 */
function scoreGroup(
  entry: PlayedGroup,
  config: RlInput,
  totals: RlTotals,
  tokenizerFingerprint: string,
  viewOf: (trajectory: Trajectory, sampled: TokenExactEpisodeView | undefined) => TokenView,
  policyKind: PolicyKind,
  toolCallParser: string | undefined,
  chat: { distribution: LogprobDistribution; refusal: string | undefined } | undefined,
): EpisodeRecord[] {
  const { trajectories, harness } = entry;
  const kind = harness.canonical ? 'canonical' : 'variant';
  const rewards = trajectories.map((trajectory) => trajectory.reward.total);
  const scored = trajectories.map((trajectory) => isScored(trajectory.status));
  const advantage = groupAdvantages(rewards, scored, config.advantage);
  const group = {
    mean: advantage.mean,
    std: advantage.std,
    scored: advantage.scored,
    zeroVariance: advantage.zeroVariance,
  };
  const records = trajectories.map((trajectory, sampleIndex) => {
    const sampled = entry.sampled[sampleIndex];
    const view = viewOf(trajectory, sampled);
    if (!view.ok)
      totals.episodes.tokenViewFailures[view.code] = (totals.episodes.tokenViewFailures[view.code] ?? 0) + 1;
    if (sampled) addTokenExact(totals, sampled);
    const chatLogprobs = chat ? chatLogprobsMetadata(trajectory, chat.distribution, chat.refusal) : undefined;
    if (chatLogprobs) totals.chatLogprobs = addChatLogprobs(totals.chatLogprobs, chatLogprobs);
    return buildEpisodeRecord({
      policyKind,
      ...(chatLogprobs ? { chatLogprobs } : {}),
      ...(sampled ? { sampled } : {}),
      ...(toolCallParser !== undefined ? { toolCallParser } : {}),
      trajectory,
      view,
      groupIndex: entry.group.groupIndex,
      groupSize: config.groupSize,
      groupHarness: harness,
      advantage: advantage.advantages[sampleIndex],
      samplingSeed: entry.samplingSeeds[sampleIndex],
      group,
      tokenizerFingerprint,
      policyVersion: config.policyVersion ?? 1,
    });
  });
  const withFailures = records.some((record) => record.status !== 'ok');
  const dropZeroVariance = advantage.zeroVariance && config.zeroVarianceGroups === 'drop';
  const dropFailures = withFailures && config.groupsWithFailures === 'drop';
  const kept = !dropZeroVariance && !dropFailures;

  totals.groups.played += 1;
  totals.groups[kind] += 1;
  if (advantage.zeroVariance) totals.groups.zeroVariance += 1;
  if (dropZeroVariance) totals.groups.zeroVarianceDropped += 1;
  if (withFailures) totals.groups.withFailures += 1;
  if (dropFailures) totals.groups.withFailuresDropped += 1;
  if (kept) totals.groups.kept += 1;
  let passed = 0;
  for (const [sampleIndex, trajectory] of trajectories.entries()) {
    const record = records[sampleIndex];
    totals.episodes.played += 1;
    totals.episodes.byStatus[record.status] = (totals.episodes.byStatus[record.status] ?? 0) + 1;
    totals.steps += trajectory.calls.length;
    if (!scored[sampleIndex]) continue;
    totals.episodes.scored += 1;
    const pass = trajectory.reward.total >= config.passThreshold;
    if (pass) passed += 1;
    addToBucket(
      (totals.reward[kind][trajectory.category] ??= emptyBucket()),
      trajectory.reward.total,
      trajectory.reward.components,
      pass,
    );
    for (const family of harness.variant?.families ?? [])
      addToBucket(
        (totals.families[family] ??= emptyBucket()),
        trajectory.reward.total,
        trajectory.reward.components,
        pass,
      );
  }
  addPassAtK(totals.passAtK[kind], advantage.scored, passed);
  if (!kept) return [];
  for (const [sampleIndex, record] of records.entries()) {
    totals.episodes.written += 1;
    totals.tokens.total += record.tokens.length;
    totals.tokens.trained += record.loss_mask.reduce((sum, bit) => sum + bit, 0);
    if (!scored[sampleIndex]) continue;
    totals.advantage.count += 1;
    totals.advantage.absSum += Math.abs(record.advantage);
    if (record.advantage === 0) totals.advantage.zero += 1;
  }
  return records;
}
