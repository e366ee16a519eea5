import { formatPercent } from './format-percent';

describe('formatPercent', () => {
  it('shows ordinary shares with the given decimals', () => {
    expect(formatPercent(0.5)).toBe('50.0%');
    expect(formatPercent(1)).toBe('100.0%');
    expect(formatPercent(0)).toBe('0.0%');
    expect(formatPercent(0.12345, 2)).toBe('12.35%');
  });

  it('never rounds a shortfall up to 100% nor a presence down to 0%', () => {
    expect(formatPercent(0.99995)).toBe('99.995%');
    expect(formatPercent(0.9996)).toBe('99.96%');
    expect(formatPercent(0.00004)).toBe('0.004%');
    expect(formatPercent(1 - 1e-12)).toBe('<99.999999%');
    expect(formatPercent(1e-12)).toBe('<0.000001%');
  });
});
