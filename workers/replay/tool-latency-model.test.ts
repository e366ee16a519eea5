import { percentilesOf } from '../../shared/metrics/percentile';
import { Rng } from '../../shared/random/rng';
import { toolLatencySchema, toolThinkTimeFor } from './tool-latency-model';

describe('tool latency model', () => {
  it('draws lognormal tool times matching the configured p50 and p95, the slowest of a batch, seeded', () => {
    const config = toolLatencySchema.parse({ tools: { get_item_detail: { p50Ms: 300, p95Ms: 900 } } });
    const think = toolThinkTimeFor(config, { simulator: true }, new Rng('tools'));
    expect(think).toBeDefined();
    const draws = Array.from({ length: 20_000 }, (_, index) => think!(['get_item_detail'], index));
    const [p50, p95] = percentilesOf(draws, [50, 95]);
    expect(Math.abs(p50 / 300 - 1)).toBeLessThan(0.03);
    expect(Math.abs(p95 / 900 - 1)).toBeLessThan(0.05);
    // Unnamed tools follow the documented default (p50 200 ms, p95 800 ms).
    const [defaultP50] = percentilesOf(
      Array.from({ length: 20_000 }, (_, index) => think!(['get_coupons'], index)),
      [50],
    );
    expect(Math.abs(defaultP50 / 200 - 1)).toBeLessThan(0.03);
    // Tools of one call run side by side: the call waits for the slowest, never less than each alone.
    for (let index = 0; index < 200; index++)
      expect(think!(['get_item_detail', 'get_coupons'], index)).toBeGreaterThanOrEqual(
        think!(['get_item_detail'], index),
      );
    expect(toolThinkTimeFor(config, { simulator: true }, new Rng('tools'))!(['get_item_detail'], 7)).toBe(draws[7]);
  });

  it('leaves production traces their recorded times unless told to apply to all; none turns it off', () => {
    expect(toolThinkTimeFor(toolLatencySchema.parse({}), { simulator: false }, new Rng('x'))).toBeUndefined();
    expect(
      toolThinkTimeFor(toolLatencySchema.parse({ apply: 'all' }), { simulator: false }, new Rng('x')),
    ).toBeDefined();
    expect(
      toolThinkTimeFor(toolLatencySchema.parse({ apply: 'none' }), { simulator: true }, new Rng('x')),
    ).toBeUndefined();
    expect(
      toolLatencySchema.safeParse({ tools: { search: { p50Ms: 500, p95Ms: 100 } } }).error?.issues[0]?.path,
    ).toEqual(['tools', 'search', 'p95Ms']);
  });
});
