/**
 * rl stage. Input: a task set (files or generator settings), the canonical harness, HSA family
 * weights, the canonical share, the policy (a model config: the served checkpoint's endpoint, or
 * the stochastic scripted policy by default), group size G, groups, turns and steps, viewer
 * follow-ups, tokenizer, seed, advantage options, what to do with zero-variance and failed
 * groups, an optional curriculum.
 * Plan: loads and checks the harness and tokenizer, reads the tasks (and the curriculum's
 * previous stats), assigns a task and canonical-or-variant to every group, writes
 * `groups.jsonl.gz` and `plan.json`, and cuts the groups into parts.
 * Part i: builds each group's harness (a fresh HSA variant from `<seed>/rl/group-<g>`), plays G
 * episodes per group, scores them, computes GRPO advantages and token views, and writes
 * `part-NNNNN.parquet` and `part-NNNNN.jsonl.gz` (the same episode records).
 * Finish: `stats.json`, `report.html`, then `manifest.json` last.
 * Idempotency: object keys come from the part index; every draw is seeded by (seed, group,
 * episode), so with a deterministic policy a retried or re-planned part writes identical bytes.
 * Retried: transient faults (the store; a part where more than maxPolicyErrorShare of the
 * episodes hit endpoint errors). Never: bad config, tasks or harness, an unknown tokenizer, a
 * plan or harness that changed under a running stage. Single policy errors are recorded on
 * their episodes, not thrown.
 */
import { defineStage, type StageDeps } from '../../queues/stage-kit/define-stage';
import { writeStageManifest } from '../../queues/stage-kit/stage-manifest';
import { writeJsonl } from '../../shared/artifacts/jsonl-writer';
import { manifestObjectOf, type ManifestObject } from '../../shared/artifacts/manifest';
import { HatError } from '../../shared/errors';
import { hashValue, sha256Hex } from '../../shared/hash/hash';
import { harnessHash } from '../../shared/harness/harness-hash';
import { checkSamplerTokenizer } from '../../shared/models/token-exact/sampler-tokenizer-check';
import { loadTokenizerSource } from '../../queues/stage-kit/load-tokenizer-source';
import { loadHarnessFromUri } from '../../queues/stage-kit/load-harness-from-uri';
import { RL_EPISODE_SCHEMA_VERSION } from './episode-records';
import { groupVariant } from './group-harness';
import { loadRlTasks, planGroups, rlGroupSchema, RL_GROUPS_SCHEMA_VERSION } from './group-plan';
import {
  rlContract,
  type RlInput,
  type RlOutput,
  type RlPartInput,
  type RlPartOutput,
  type RlPartTiming,
} from './rl-contract';
import { checkTokenExactPolicy, harnessUriOf, runRlPart, tokenExactPolicyOf } from './rl-part';
import { rlReportHtml } from './rl-report';
import { buildRlStats, type RlTotals } from './rl-stats';

const groupsObject = 'groups.jsonl.gz';
const planObject = 'plan.json';
const statsObject = 'stats.json';
const reportObject = 'report.html';

/** What plan records for finish: lineage and the curriculum it applied. */
interface RlPlanRecord {
  seed: string;
  harness: { uri: string; hash: string };
  tasks: number;
  lineage: Array<{ uri: string; sha256: string }>;
  curriculum?: { statsUri: string; weights: Record<string, number>; previousMeans: Record<string, number | null> };
}

function seedOf(input: RlInput, deps: Pick<StageDeps, 'run'>): string {
  return input.seed ?? deps.run.seed;
}

/** Checks harness, tokenizer and tasks, assigns every group its task and harness kind, and cuts the groups into parts. */
export async function planRl(input: RlInput, deps: StageDeps): Promise<RlPartInput[]> {
  const seed = seedOf(input, deps);
  const harnessUri = harnessUriOf(input);
  const canonical = await loadHarnessFromUri(harnessUri, deps.openObject);
  const hash = harnessHash(canonical);
  // Fail once, before any part runs: an unknown tokenizer, or family weights that cannot change this harness.
  const tokenizer = await loadTokenizerSource(input.tokenizer, deps.openObject);
  const sampler = tokenExactPolicyOf(input, { logger: deps.logger });
  if (sampler) {
    // A token-exact policy: its logprobs must be of the sampling distribution, and it must read our ids as our text.
    try {
      checkTokenExactPolicy(sampler, input);
      // A policy that names its own tokenizer (an in-process model's, a served model's copy) must have rl.tokenizer's.
      const own = sampler.tokenizer
        ? await loadTokenizerSource(sampler.tokenizer, deps.openObject, 'rl.policy.tokenizer')
        : undefined;
      await checkSamplerTokenizer(sampler, tokenizer, {
        label: `rl.policy ${sampler.modelId} (${sampler.engine} at ${sampler.location})`,
        tokenizerLabel: `rl.tokenizer ${tokenizer.name}`,
        ...(own ? { samplerFingerprint: own.fingerprint } : {}),
        signal: deps.signal,
      });
    } finally {
      await sampler.close();
    }
  }
  if (input.canonicalShare < 1) groupVariant(canonical, 0, seed, input.families);
  const { tasks, lineage } = await loadRlTasks(input, deps.openObject);
  const { groups, curriculum } = await planGroups(input, tasks, seed, deps.openObject);
  const written = await writeJsonl(deps.store, deps.output.key(groupsObject), groups, { schema: rlGroupSchema });
  const record: RlPlanRecord = {
    seed,
    harness: { uri: harnessUri, hash },
    tasks: tasks.length,
    lineage: [...lineage, ...(curriculum ? [curriculum.lineage] : [])],
    ...(curriculum
      ? {
          curriculum: {
            statsUri: curriculum.lineage.uri,
            weights: curriculum.weights,
            previousMeans: curriculum.previousMeans,
          },
        }
      : {}),
  };
  await deps.store.put(deps.output.key(planObject), `${JSON.stringify(record, null, 2)}\n`, {
    contentType: 'application/json',
  });
  const parts: RlPartInput[] = [];
  for (let start = 0; start < groups.length; start += input.groupsPerPart) {
    parts.push({
      index: parts.length,
      groups: {
        uri: written.uri,
        sha256: written.sha256,
        start,
        count: Math.min(input.groupsPerPart, groups.length - start),
      },
      config: input,
      seed,
      harnessHash: hash,
    });
  }
  return parts;
}

export function createRlProcessor(deps: StageDeps) {
  return (part: RlPartInput): Promise<RlPartOutput> => runRlPart(part, deps);
}

/** Merges the parts' totals into `stats.json` and `report.html`, then writes the manifest last. */
export async function finishRl(input: RlInput, parts: RlPartOutput[], deps: StageDeps): Promise<RlOutput> {
  const first = parts[0];
  if (!first)
    throw new HatError('RL_NO_PARTS', 'rl finished without parts; plan always makes at least one, so this is a bug');
  if (parts.some((part) => hashValue([part.policy, part.tokenizer]) !== hashValue([first.policy, first.tokenizer]))) {
    throw new HatError(
      'RL_MODELS_CHANGED',
      'rl parts report different policies or tokenizers (one changed while the stage ran); rerun the stage',
    );
  }
  const planKey = deps.output.key(planObject);
  const planBytes = await deps.store.getBuffer(planKey);
  const plan = JSON.parse(planBytes.toString('utf8')) as RlPlanRecord;
  const stats = buildRlStats(
    parts.map((part) => part.totals as unknown as RlTotals),
    {
      policy: first.policy,
      tokenizer: first.tokenizer,
      settings: {
        seed: plan.seed,
        harness: plan.harness,
        tasks: plan.tasks,
        groups: input.groups,
        groupSize: input.groupSize,
        canonicalShare: input.canonicalShare,
        families: input.families,
        passThreshold: input.passThreshold,
        advantage: input.advantage,
        zeroVarianceGroups: input.zeroVarianceGroups,
        groupsWithFailures: input.groupsWithFailures,
        maxTurns: input.maxTurns ?? null,
        maxStepsPerTurn: input.maxStepsPerTurn,
        viewer: input.viewer.kind,
        sampling: input.sampling,
        ...(plan.curriculum ? { curriculum: plan.curriculum } : {}),
      },
    },
  );
  const statsInfo = await deps.store.put(deps.output.key(statsObject), `${JSON.stringify(stats, null, 2)}\n`, {
    contentType: 'application/json',
  });
  const reportInfo = await deps.store.put(deps.output.key(reportObject), rlReportHtml({ runId: deps.run.id, stats }), {
    contentType: 'text/html; charset=utf-8',
  });
  const stored = async (
    key: string,
    details: { schemaVersion: number; format: string; records?: number; kind: string },
  ): Promise<ManifestObject> => {
    const bytes = await deps.store.getBuffer(key);
    return manifestObjectOf(
      { key, uri: deps.store.uriOf(key), sha256: sha256Hex(bytes), bytes: bytes.length },
      details,
    );
  };
  const objects: ManifestObject[] = [
    ...parts.flatMap((part) => [
      { ...part.parquet, schemaVersion: RL_EPISODE_SCHEMA_VERSION, format: 'parquet' },
      { ...part.jsonl, schemaVersion: RL_EPISODE_SCHEMA_VERSION, format: 'jsonl.gz' },
    ]),
    await stored(deps.output.key(groupsObject), {
      schemaVersion: RL_GROUPS_SCHEMA_VERSION,
      format: 'jsonl.gz',
      records: input.groups,
      kind: 'groups',
    }),
    await stored(planKey, { schemaVersion: RL_GROUPS_SCHEMA_VERSION, format: 'json', kind: 'plan' }),
    manifestObjectOf(statsInfo, { schemaVersion: stats.schemaVersion, format: 'json', kind: 'stats' }),
    manifestObjectOf(reportInfo, { schemaVersion: stats.schemaVersion, format: 'html', kind: 'report' }),
  ];
  const { info } = await writeStageManifest(deps, {
    objects,
    lineage: {
      inputs: [{ uri: plan.harness.uri, sha256: plan.harness.hash }, ...plan.lineage],
      configHash: hashValue(input),
    },
    // The policy version in the stats lets a trainer handoff say which version each dataset came from.
    stats: { ...(stats as unknown as Record<string, unknown>), policyVersion: input.policyVersion ?? 1 },
  });
  const timing = parts.reduce<RlPartTiming>(
    (sum, part) => ({
      partMs: sum.partMs + part.timing.partMs,
      episodeMs: sum.episodeMs + part.timing.episodeMs,
      policyMs: sum.policyMs + part.timing.policyMs,
      tokenViewMs: sum.tokenViewMs + part.timing.tokenViewMs,
      variantMs: sum.variantMs + part.timing.variantMs,
      steps: sum.steps + part.timing.steps,
      episodes: sum.episodes + part.timing.episodes,
    }),
    { partMs: 0, episodeMs: 0, policyMs: 0, tokenViewMs: 0, variantMs: 0, steps: 0, episodes: 0 },
  );
  return {
    manifestUri: info.uri,
    statsUri: statsInfo.uri,
    reportUri: reportInfo.uri,
    parts: parts.length,
    groups: stats.counts.groups.played,
    groupsKept: stats.counts.groups.kept,
    episodes: stats.counts.episodes.played,
    episodesWritten: stats.counts.episodes.written,
    meanReward: stats.reward.all.mean ?? 0,
    canonicalVariantGap: stats.canonicalVariantGap.gap,
    simulatedPolicy: stats.policy.simulated,
    ...(stats.policy.tokenExact !== undefined
      ? {
          tokenExact: {
            exact: stats.policy.tokenExact,
            engine: stats.policy.provider,
            episodes: stats.tokenExact?.episodes ?? 0,
            drifted: stats.tokenExact?.drifted ?? 0,
          },
        }
      : {}),
    timing,
  };
}

export const rlStage = defineStage({
  ...rlContract,
  plan: planRl,
  createProcessor: createRlProcessor,
  finish: finishRl,
});
