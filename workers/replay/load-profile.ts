import { z } from 'zod';
import { BadInputError } from '../../shared/errors';
import type { Rng } from '../../shared/random/rng';

/**
 * How sessions are offered to the target.
 * - closed: `concurrency` sessions in flight; a session starts when one ends (vLLM's
 *   `--max-concurrency` with a request rate of inf, at the session level).
 * - open: sessions arrive at `rate` per second whatever the server does; gaps between arrivals
 *   are gamma distributed with shape `burstiness` (1 = Poisson; < 1 burstier; > 1 more even),
 *   the same process as `vllm bench serve --request-rate --burstiness`. `maxConcurrency`
 *   optionally caps sessions in flight: arrivals beyond it wait, and that wait shows in the
 *   latencies measured from intended send times.
 */
export const loadProfileSchema = z.discriminatedUnion('kind', [
  z
    .object({
      kind: z.literal('closed'),
      /** Sessions in flight at once. Default 1. */
      concurrency: z.number().int().min(1).max(100_000).default(1),
    })
    .strict(),
  z
    .object({
      kind: z.literal('open'),
      /** Session arrivals per second. */
      rate: z.number().positive(),
      /** Gamma shape of the gaps between arrivals: 1 = Poisson. Default 1. */
      burstiness: z.number().positive().default(1),
      /** Most sessions in flight; arrivals beyond it wait. Default: no cap. */
      maxConcurrency: z.number().int().min(1).max(100_000).optional(),
    })
    .strict(),
]);
export type LoadProfile = z.infer<typeof loadProfileSchema>;

/**
 * The share of the load one of `parts` part jobs offers, so that the parts running side by side
 * offer the whole: concurrency split as evenly as integers allow, rate divided evenly (the sum of
 * independent arrival processes at rate r/n is a process at rate r).
 */
export function loadShare(load: LoadProfile, partIndex: number, parts: number): LoadProfile {
  if (load.kind === 'closed') {
    if (parts > load.concurrency) {
      throw new BadInputError(
        'REPLAY_TOO_MANY_PARTS',
        `parts (${parts}) exceeds load.concurrency (${load.concurrency}); every part needs at least one session in flight`,
      );
    }
    const base = Math.floor(load.concurrency / parts);
    return { kind: 'closed', concurrency: base + (partIndex < load.concurrency % parts ? 1 : 0) };
  }
  const maxConcurrency =
    load.maxConcurrency === undefined
      ? undefined
      : Math.max(1, Math.floor(load.maxConcurrency / parts) + (partIndex < load.maxConcurrency % parts ? 1 : 0));
  return {
    kind: 'open',
    rate: load.rate / parts,
    burstiness: load.burstiness,
    ...(maxConcurrency !== undefined ? { maxConcurrency } : {}),
  };
}

/**
 * Intended start offsets (ms from the start of the measured phase) of `count` session arrivals:
 * the first at 0, then gamma(shape = burstiness, scale = 1 / (rate x burstiness)) gaps, whose mean
 * is 1 / rate whatever the burstiness.
 */
export function arrivalOffsetsMs(count: number, rate: number, burstiness: number, rng: Rng): number[] {
  const offsets: number[] = [];
  let at = 0;
  for (let index = 0; index < count; index++) {
    offsets.push(at);
    at += gammaSample(burstiness, 1 / (rate * burstiness), rng) * 1000;
  }
  return offsets;
}

/**
 * Gamma(shape, scale) by Marsaglia and Tsang's squeeze method (shape < 1 through the boost
 * gamma(a) = gamma(a + 1) x U^(1/a)). Hand-written: the generator must be our seeded Rng, which
 * no statistics package on the registry accepts.
 */
export function gammaSample(shape: number, scale: number, rng: Rng): number {
  if (shape < 1) {
    const boost = Math.pow(1 - rng.next(), 1 / shape);
    return gammaSample(shape + 1, scale, rng) * boost;
  }
  const d = shape - 1 / 3;
  const c = 1 / Math.sqrt(9 * d);
  for (;;) {
    let x: number;
    let v: number;
    do {
      x = rng.normal();
      v = 1 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const u = 1 - rng.next();
    if (u < 1 - 0.0331 * x ** 4) return d * v * scale;
    if (Math.log(u) < 0.5 * x * x + d * (1 - v + Math.log(v))) return d * v * scale;
  }
}
