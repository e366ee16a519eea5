import { figureLines, formatFigure, shareOf } from './stage-summary';

describe('stage figures', () => {
  it('shows ratios as percentages, milliseconds and scores with fixed decimals, counts with separators', () => {
    expect(formatFigure({ value: 0.8754, unit: 'ratio' })).toBe('87.5%');
    expect(formatFigure({ value: 812.25, unit: 'ms' })).toBe('812.3 ms');
    expect(formatFigure({ value: -0.04567, unit: 'score' })).toBe('-0.046');
    expect(formatFigure({ value: 1234567 })).toBe('1,234,567');
    expect(formatFigure({ value: 'no-data', unit: 'ms' })).toBe('no-data');
  });

  it('marks warnings and failures in the CLI lines and keeps the detail', () => {
    expect(
      figureLines([
        { label: 'acceptance rate', value: 0.5, unit: 'ratio', detail: 'tasks with an accepted trajectory' },
        { label: 'tasks to review', value: 3, tone: 'warn' },
        { label: 'latency SLO', value: 'pass', tone: 'pass' },
      ]),
    ).toEqual([
      'acceptance rate: 50.0% (tasks with an accepted trajectory)',
      '! tasks to review: 3',
      'latency SLO: pass',
    ]);
  });

  it('gives an empty whole a zero share rather than NaN', () => {
    expect(shareOf(0, 0)).toBe(0);
    expect(shareOf(3, 4)).toBe(0.75);
  });
});
