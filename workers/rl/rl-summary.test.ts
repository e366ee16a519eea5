import { rlContract, type RlOutput } from './rl-contract';

const output = (gap: number | null, simulatedPolicy: boolean): RlOutput =>
  ({
    manifestUri: 'file:///a/runs/r/rl/manifest.json',
    statsUri: 'file:///a/runs/r/rl/stats.json',
    reportUri: 'file:///a/runs/r/rl/report.html',
    parts: 2,
    groups: 16,
    groupsKept: 12,
    episodes: 64,
    episodesWritten: 48,
    meanReward: 0.61234,
    canonicalVariantGap: gap,
    simulatedPolicy,
    timing: {},
  }) as unknown as RlOutput;

describe('rl key figures', () => {
  it('shows the canonical-minus-variant reward gap, or says why there is none', () => {
    const withGap = rlContract.summarize!(output(0.125, false));
    expect(withGap.figures.find((figure) => figure.label.startsWith('reward gap'))).toMatchObject({
      value: 0.125,
      unit: 'score',
    });
    expect(withGap.figures.some((figure) => figure.label === 'policy')).toBe(false);
    const without = rlContract.summarize!(output(null, true));
    expect(without.figures.find((figure) => figure.label.startsWith('reward gap'))).toMatchObject({
      value: 'n/a',
      detail: expect.stringContaining('canonical harness and variants'),
    });
    expect(without.figures.find((figure) => figure.label === 'policy')).toMatchObject({
      value: 'simulated',
      tone: 'warn',
    });
    expect(without.links.map((link) => link.label)).toEqual(['rl report', 'stats']);
  });
});
