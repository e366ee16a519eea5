import type { PrometheusSample } from './prometheus-text';

/** vLLM v1's speculative-decoding counters (server-wide, summed over engines and models). */
export const specDecodeCounterNames = {
  drafts: 'vllm:spec_decode_num_drafts_total',
  draftTokens: 'vllm:spec_decode_num_draft_tokens_total',
  acceptedTokens: 'vllm:spec_decode_num_accepted_tokens_total',
  acceptedTokensPerPosition: 'vllm:spec_decode_num_accepted_tokens_per_pos_total',
} as const;

/** One reading of the counters. */
export interface SpecDecodeCounters {
  drafts: number;
  draftTokens: number;
  acceptedTokens: number;
  /** Accepted tokens by draft position (0-based, from the `position` label). */
  acceptedPerPosition: number[];
  /** Whether the server exposes the counters at all (absent: no speculative decoding configured). */
  present: boolean;
}

/** The counters in a scrape; series of the same name (engines, models) are summed. */
export function readSpecDecodeCounters(samples: readonly PrometheusSample[]): SpecDecodeCounters {
  const counters: SpecDecodeCounters = {
    drafts: 0,
    draftTokens: 0,
    acceptedTokens: 0,
    acceptedPerPosition: [],
    present: false,
  };
  for (const sample of samples) {
    if (!Number.isFinite(sample.value)) continue;
    switch (sample.name) {
      case specDecodeCounterNames.drafts:
        counters.drafts += sample.value;
        counters.present = true;
        break;
      case specDecodeCounterNames.draftTokens:
        counters.draftTokens += sample.value;
        counters.present = true;
        break;
      case specDecodeCounterNames.acceptedTokens:
        counters.acceptedTokens += sample.value;
        counters.present = true;
        break;
      case specDecodeCounterNames.acceptedTokensPerPosition: {
        const position = Number(sample.labels.position);
        if (!Number.isInteger(position) || position < 0) break;
        while (counters.acceptedPerPosition.length <= position) counters.acceptedPerPosition.push(0);
        counters.acceptedPerPosition[position] += sample.value;
        counters.present = true;
        break;
      }
      default:
        break;
    }
  }
  return counters;
}

/** What the server's counters say about the traffic between two readings. */
export interface SpecDecodeReport {
  available: boolean;
  /** Why the figures are missing or doubtful. */
  note: string;
  drafts?: number;
  draftTokens?: number;
  acceptedTokens?: number;
  acceptedPerPosition?: number[];
  /** accepted / draft tokens. */
  acceptanceRate?: number | null;
  /** 1 + accepted / drafts: tokens emitted per target-model step. */
  acceptanceLength?: number | null;
  /** accepted at position i / drafts (vLLM's per-position acceptance rate). */
  perPositionAcceptanceRate?: number[];
}

const serverWideNote = 'server-wide counters: any other traffic to the server during the replay is counted too';

/** Acceptance figures from two readings, as vLLM's own spec-decode logging computes them. */
export function specDecodeDelta(before: SpecDecodeCounters, after: SpecDecodeCounters): SpecDecodeReport {
  if (!before.present && !after.present)
    return {
      available: false,
      note: 'the server exposes no vllm:spec_decode_* counters (speculative decoding off, or not vLLM)',
    };
  const drafts = after.drafts - before.drafts;
  const draftTokens = after.draftTokens - before.draftTokens;
  const acceptedTokens = after.acceptedTokens - before.acceptedTokens;
  const positions = Math.max(before.acceptedPerPosition.length, after.acceptedPerPosition.length);
  const acceptedPerPosition = Array.from(
    { length: positions },
    (_, position) => (after.acceptedPerPosition[position] ?? 0) - (before.acceptedPerPosition[position] ?? 0),
  );
  if (drafts < 0 || draftTokens < 0 || acceptedTokens < 0 || acceptedPerPosition.some((value) => value < 0)) {
    return {
      available: false,
      note: 'a counter went down between the readings: the server restarted during the replay',
    };
  }
  return {
    available: true,
    note: serverWideNote,
    drafts,
    draftTokens,
    acceptedTokens,
    acceptedPerPosition,
    acceptanceRate: draftTokens > 0 ? acceptedTokens / draftTokens : null,
    acceptanceLength: drafts > 0 ? 1 + acceptedTokens / drafts : null,
    perPositionAcceptanceRate: acceptedPerPosition.map((accepted) => (drafts > 0 ? accepted / drafts : 0)),
  };
}
