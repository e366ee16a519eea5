import type { Interval } from './bootstrap-interval';
import { escapeHtml } from '../../shared/report/html';

/** Cells of the eval report's tables (eval-report.ts and each suite's section, suites/*.ts). */

export const fixed = (value: number | null | undefined, digits = 1): string =>
  value === null || value === undefined || Number.isNaN(value) ? '–' : value.toFixed(digits);

/** A 0–100 score as a bar with its interval as a whisker. */
function intervalBar(cell: Interval | null | undefined): string {
  if (!cell) return '';
  const x = (value: number) => Math.round(Math.max(0, Math.min(100, value)) * 1.4);
  return (
    `<svg width="144" height="14" role="img" aria-label="${fixed(cell.score)} [${fixed(cell.low)}, ${fixed(cell.high)}]">` +
    `<rect x="0" y="2" width="140" height="10" fill="#eee"/><rect x="0" y="2" width="${x(cell.score)}" height="10" fill="#3b7dd8"/>` +
    `<line x1="${x(cell.low)}" x2="${x(cell.high)}" y1="7" y2="7" stroke="#111" stroke-width="1.5"/>` +
    `<line x1="${x(cell.low)}" x2="${x(cell.low)}" y1="3" y2="11" stroke="#111"/><line x1="${x(cell.high)}" x2="${x(cell.high)}" y1="3" y2="11" stroke="#111"/></svg>`
  );
}

export function cellHtml(cell: Interval | null | undefined): string {
  if (!cell) return '<td>–</td>';
  return `<td title="${cell.items} items"><b>${fixed(cell.score)}</b> <span class="ci">[${fixed(cell.low)}, ${fixed(cell.high)}]</span><br>${intervalBar(cell)}</td>`;
}

/** A table of rows (labels) × columns, each cell an interval. */
export function intervalTable(columns: string[], rows: Array<[string, Array<Interval | null | undefined>]>): string {
  return `<table><tr><th></th>${columns.map((column) => `<th>${escapeHtml(column)}</th>`).join('')}</tr>${rows
    .map(([label, cells]) => `<tr><th>${escapeHtml(label)}</th>${cells.map(cellHtml).join('')}</tr>`)
    .join('')}</table>`;
}
