import type { StageSummary } from '../../queues/stage-kit/stage-summary';
import type { RlOutput, RlPartOutput } from './rl-contract';
import type { RlTotals } from './rl-stats';

/** Run-report figures of rl: episodes, rewards and the canonical-vs-variant reward gap. */
export function summarizeRl(output: RlOutput): StageSummary {
  return {
    figures: [
      { label: 'episodes', value: output.episodes, detail: `${output.episodesWritten} written` },
      {
        label: 'groups kept',
        value: output.groupsKept,
        detail: `of ${output.groups}; groups with equal rewards carry no advantage`,
      },
      { label: 'mean reward', value: output.meanReward, unit: 'score' },
      {
        label: 'reward gap, canonical − variants',
        value: output.canonicalVariantGap ?? 'n/a',
        ...(output.canonicalVariantGap !== null ? { unit: 'score' as const } : {}),
        detail:
          output.canonicalVariantGap === null
            ? 'needs episodes under both the canonical harness and variants'
            : 'what harness-aware training exists to shrink',
      },
      ...(output.simulatedPolicy
        ? [
            {
              label: 'policy',
              value: 'simulated',
              tone: 'warn' as const,
              detail: output.tokenExact
                ? 'a model with random (dummy) weights'
                : 'the stochastic scripted policy, not a model',
            },
          ]
        : []),
      ...(output.tokenExact
        ? [
            output.tokenExact.exact
              ? {
                  label: 'records',
                  value: 'token-exact',
                  detail: `${output.tokenExact.episodes} episodes as sampled from ${output.tokenExact.engine} (token ids, rollout logprobs); ${output.tokenExact.drifted} differ from a fresh render (as-sampled ids kept)`,
                }
              : {
                  label: 'records',
                  value: 'not token-exact',
                  tone: 'warn' as const,
                  detail: 'a chat endpoint: tokens are the conversation re-tokenized, not the ids sampled',
                },
          ]
        : []),
    ],
    links: [
      { label: 'rl report', uri: output.reportUri },
      { label: 'stats', uri: output.statsUri },
    ],
  };
}

/** Prometheus counters of one part: groups and episodes played, environment steps, tokens written. */
export function rlPartCounters(part: RlPartOutput): Record<string, number> {
  const totals = part.totals as unknown as RlTotals;
  return {
    groups: totals.groups.played,
    episodes: totals.episodes.played,
    steps: totals.steps,
    tokens: totals.tokens.total,
  };
}
