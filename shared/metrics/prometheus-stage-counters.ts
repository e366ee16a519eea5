/**
 * Stage counters: the work a stage reports (trajectories, variants, tokens, episodes, ...) as
 * Prometheus counters `hat_stage_counter_total{stage, counter}`. A stage exposes them in one of
 * three ways, checked in this order:
 *
 * 1. Its contract's `partCounters(partOutput)` returns them, or part outputs carry
 *    `counters: { <name>: <number> }` (declared in the stage's `partOutput` schema): counted as
 *    each part completes, so dashboards see a run progress.
 * 2. The stage output carries `counters`: counted when the stage job completes.
 * 3. Neither: the non-negative integer fields at the top of the stage manifest's `stats`
 *    (`schemaVersion` and measurements such as `*Ms`, `*Rate`, `mean*`, `p95*` left out) are
 *    counted when the stage job completes.
 *
 * A stage that declares part counters is never counted again from its stage output or manifest.
 */

/** Counter names become label values; keep them short identifiers. */
const counterNamePattern = /^[A-Za-z_][A-Za-z0-9_.-]{0,63}$/;

/** Stats fields that measure rather than count (durations, ratios, means, percentiles). */
const measurementPattern =
  /^(schemaVersion|mean|median|avg|p\d+|min|max)|(Ms|Seconds|Rate|Ratio|Fraction|Percent|Mean|P\d+)$/;

/** The numeric fields of `value.counters`, or undefined when `value` has no `counters` object. */
export function countersOf(value: unknown): Record<string, number> | undefined {
  const counters = (value as { counters?: unknown } | null | undefined)?.counters;
  if (typeof counters !== 'object' || counters === null || Array.isArray(counters)) return undefined;
  const result: Record<string, number> = {};
  for (const [name, count] of Object.entries(counters)) {
    if (typeof count === 'number' && Number.isFinite(count) && count >= 0 && counterNamePattern.test(name))
      result[name] = count;
  }
  return result;
}

/** Counter-like fields of a manifest's `stats` (see rule 3 above). */
export function countersFromStats(stats: unknown): Record<string, number> {
  const result: Record<string, number> = {};
  if (typeof stats !== 'object' || stats === null || Array.isArray(stats)) return result;
  for (const [name, count] of Object.entries(stats)) {
    if (typeof count !== 'number' || !Number.isSafeInteger(count) || count < 0) continue;
    if (!counterNamePattern.test(name) || measurementPattern.test(name)) continue;
    result[name] = count;
  }
  return result;
}

/** Whether a `partOutput` schema (zod object) declares a `counters` field: rule 1 applies. */
export function declaresCounters(schema: unknown): boolean {
  const shape = (schema as { shape?: unknown } | null | undefined)?.shape;
  return typeof shape === 'object' && shape !== null && 'counters' in shape;
}
