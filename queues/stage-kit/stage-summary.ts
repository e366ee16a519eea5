import { formatPercent } from '../../shared/metrics/format-percent';
import { z } from 'zod';
import { findStage } from './stage-registry';

/**
 * The key figures of a completed stage, as the run report shows them: what an operator checks
 * first (acceptance rate, variant checks, token counts, reward gap, latency SLO) and where the
 * stage's own reports are. A stage contract's `summarize(output)` builds it from the stage output.
 */
export const stageFigureSchema = z.object({
  label: z.string(),
  /** Numbers are shown by `unit`; strings as they are. */
  value: z.union([z.number(), z.string()]),
  /** `ratio`: 0–1, shown as a percentage. Default `count`. */
  unit: z.enum(['count', 'ratio', 'ms', 'score']).optional(),
  /** How to read it: `fail` and `warn` are highlighted in the HTML report. */
  tone: z.enum(['pass', 'warn', 'fail']).optional(),
  /** A short explanation (what was checked, against what). */
  detail: z.string().optional(),
});
export type StageFigure = z.infer<typeof stageFigureSchema>;

export const stageLinkSchema = z.object({ label: z.string(), uri: z.string() });
export type StageLink = z.infer<typeof stageLinkSchema>;

export const stageSummarySchema = z.object({
  figures: z.array(stageFigureSchema),
  /** The stage's reports and data beyond its manifest (HTML report, stats, review list). */
  links: z.array(stageLinkSchema),
});
export type StageSummary = z.infer<typeof stageSummarySchema>;

/**
 * The key figures of a completed stage from its output, by the registered stage's `summarize`;
 * undefined for a stage without one. Throws when the output does not match the stage's schema.
 */
export function summarizeStageOutput(stage: string, output: unknown): StageSummary | undefined {
  const definition = findStage(stage);
  // Judged on the parsed output: a summary reads only what the schema promises.
  return definition?.summarize ? definition.summarize(definition.output.parse(output)) : undefined;
}

/** One line per figure, as `hat runs show` prints them: `label: value (detail)`, `!` before a warning or failure. */
export function figureLines(figures: readonly StageFigure[]): string[] {
  return figures.map(
    (figure) =>
      `${figure.tone === 'warn' || figure.tone === 'fail' ? '! ' : ''}${figure.label}: ${formatFigure(figure)}${figure.detail ? ` (${figure.detail})` : ''}`,
  );
}

/** Share of `part` in `whole`; 0 for an empty whole. */
export function shareOf(part: number, whole: number): number {
  return whole > 0 ? part / whole : 0;
}

/** Shows a figure's value: ratios as percentages, scores with 3 decimals, counts with separators. */
export function formatFigure(figure: Pick<StageFigure, 'value' | 'unit'>): string {
  if (typeof figure.value === 'string') return figure.value;
  switch (figure.unit) {
    case 'ratio':
      return formatPercent(figure.value);
    case 'ms':
      return `${figure.value.toFixed(1)} ms`;
    case 'score':
      return figure.value.toFixed(3);
    default:
      return figure.value.toLocaleString('en-US');
  }
}
