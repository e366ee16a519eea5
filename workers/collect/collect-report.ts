import { formatPercent } from '../../shared/metrics/format-percent';
import { escapeHtml } from '../../shared/report/html';
import { rejectionReasons, type ReviewEntry } from './collect-contract';
import { deriveFigures, rejectedTotal, type CollectCounts } from './collect-stats';

/**
 * The collect stage's stats document (stats.json) and its HTML page: one self-contained file
 * (inline CSS and SVG, no scripts, nothing fetched) with the totals, a bar chart of acceptance
 * rate and mean reward by task category, the rejection reasons, model usage and time, and the
 * first tasks listed for review.
 */

export const COLLECT_STATS_SCHEMA_VERSION = 1;

export interface CollectStatsDocument {
  schemaVersion: number;
  runId: string;
  seed: string;
  teacher: { provider: string; model: string; simulated: boolean };
  harness: { id: string; version: string; hash: string };
  samplesPerTask: number;
  selection: { mode: string; minReward: number };
  parts: number;
  totals: CollectCounts & ReturnType<typeof deriveFigures>;
  byCategory: Record<string, CollectCounts & ReturnType<typeof deriveFigures>>;
  time: {
    /** Sum of the parts' wall-clock time, ms. */
    partsMs: number;
    /** First part start to last part end, ms. */
    elapsedMs: number;
    /** Samples played per second of elapsed time. */
    episodesPerSecond: number;
  };
}

function percent(share: number): string {
  return formatPercent(share);
}

function milliseconds(value: number): string {
  return value >= 10_000 ? `${(value / 1000).toFixed(1)} s` : `${Math.round(value)} ms`;
}

const chartColors = { acceptance: '#3b6ea5', reward: '#4f9a5b' };

/** Two horizontal bars per category (0..1): acceptance rate and mean sample reward. */
function categoryChart(byCategory: CollectStatsDocument['byCategory']): string {
  const labelWidth = 170;
  const barWidth = 380;
  const groupHeight = 34;
  const top = 24;
  const rows = Object.entries(byCategory).map(([category, figures], index) => {
    const y = top + index * groupHeight;
    const bar = (value: number, offset: number, color: string, label: string) => {
      const width = Math.max(1, Math.round(value * barWidth));
      return (
        `<rect x="${labelWidth}" y="${y + offset}" width="${width}" height="12" fill="${color}"><title>${escapeHtml(category)} ${label}: ${value}</title></rect>` +
        `<text x="${labelWidth + width + 6}" y="${y + offset + 10}" font-size="11">${label === 'acceptance rate' ? percent(value) : value.toFixed(3)}</text>`
      );
    };
    return (
      `<text x="0" y="${y + 17}" font-size="12">${escapeHtml(category)} (${figures.tasks})</text>` +
      bar(figures.acceptanceRate, 2, chartColors.acceptance, 'acceptance rate') +
      bar(figures.meanSampleReward, 16, chartColors.reward, 'mean reward')
    );
  });
  const height = top + Math.max(1, rows.length) * groupHeight + 6;
  const legend =
    `<rect x="${labelWidth}" y="4" width="12" height="12" fill="${chartColors.acceptance}"/><text x="${labelWidth + 16}" y="14" font-size="11">acceptance rate (tasks with an accepted trajectory)</text>` +
    `<rect x="${labelWidth + 300}" y="4" width="12" height="12" fill="${chartColors.reward}"/><text x="${labelWidth + 316}" y="14" font-size="11">mean reward of all samples</text>`;
  const grid = [0, 0.25, 0.5, 0.75, 1]
    .map(
      (tick) =>
        `<line x1="${labelWidth + tick * barWidth}" y1="${top - 4}" x2="${labelWidth + tick * barWidth}" y2="${height - 4}" stroke="#ddd"/>`,
    )
    .join('');
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${labelWidth + barWidth + 240}" height="${height}" role="img" aria-label="acceptance rate and mean reward by category">${grid}${legend}${rows.join('')}</svg>`;
}

function categoryRow(label: string, figures: CollectCounts & ReturnType<typeof deriveFigures>): string {
  const reasons = rejectionReasons.map((reason) => `<td class="n">${figures.rejected[reason] ?? 0}</td>`).join('');
  return (
    `<tr><th>${escapeHtml(label)}</th><td class="n">${figures.tasks}</td><td class="n">${figures.tasksAccepted}</td><td class="n">${percent(figures.acceptanceRate)}</td>` +
    `<td class="n">${figures.review}</td><td class="n">${figures.samples}</td><td class="n">${figures.accepted}</td><td class="n">${figures.meanSampleReward.toFixed(3)}</td>` +
    `<td class="n">${figures.meanAcceptedReward.toFixed(3)}</td>${reasons}</tr>`
  );
}

function reviewRows(entries: readonly ReviewEntry[]): string {
  return entries
    .map((entry) => {
      const reasons = entry.reasons
        .map((reason) => `#${reason.sampleIndex} ${reason.reason}: ${reason.detail}`)
        .join('\n');
      return `<tr><td><code>${escapeHtml(entry.taskId)}</code></td><td>${escapeHtml(entry.category)}</td><td class="n">${entry.attempts}</td><td><pre>${escapeHtml(reasons)}</pre></td></tr>`;
    })
    .join('\n');
}

export function collectReportHtml(
  stats: CollectStatsDocument,
  review: { entries: readonly ReviewEntry[]; total: number },
): string {
  const { totals } = stats;
  const reasonHeaders = rejectionReasons.map((reason) => `<th>${escapeHtml(reason)}</th>`).join('');
  const categoryRows = Object.entries(stats.byCategory)
    .map(([category, figures]) => categoryRow(category, figures))
    .join('\n');
  const retries = totals.attempts - totals.calls;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Collect report · ${escapeHtml(stats.runId)}</title>
<style>
body{font-family:system-ui,-apple-system,"PingFang SC","Noto Sans CJK SC",sans-serif;margin:2rem;color:#222;max-width:1400px}
table{border-collapse:collapse;margin:.5rem 0 1.5rem}th,td{border:1px solid #ddd;padding:.3rem .6rem;font-size:13px;text-align:left;vertical-align:top}
th{background:#f5f5f5}td.n{text-align:right;font-variant-numeric:tabular-nums}pre{margin:0;white-space:pre-wrap;font-size:12px}.meta{color:#666}
</style></head><body>
<h1>Collect report</h1>
<p class="meta">run ${escapeHtml(stats.runId)} · teacher ${escapeHtml(stats.teacher.provider)} / ${escapeHtml(stats.teacher.model)}${stats.teacher.simulated ? ' (simulation policy)' : ''} · harness ${escapeHtml(stats.harness.id)} ${escapeHtml(stats.harness.version)} (${escapeHtml(stats.harness.hash.slice(0, 12))}) · seed ${escapeHtml(stats.seed)} · ${stats.samplesPerTask} sample(s) per task · selection ${escapeHtml(stats.selection.mode)}, reward ≥ ${stats.selection.minReward} · ${stats.parts} part(s)</p>
<h2>Totals</h2>
<table><tr><th>tasks</th><th>accepted tasks</th><th>acceptance rate</th><th>for review</th><th>samples</th><th>passed threshold</th><th>accepted</th><th>rejected</th><th>mean reward (samples)</th><th>mean reward (accepted)</th></tr>
<tr><td class="n">${totals.tasks}</td><td class="n">${totals.tasksAccepted}</td><td class="n">${percent(totals.acceptanceRate)}</td><td class="n">${totals.review}</td><td class="n">${totals.samples}</td><td class="n">${totals.samplesPassed}</td><td class="n">${totals.accepted}</td><td class="n">${rejectedTotal(totals)}</td><td class="n">${totals.meanSampleReward.toFixed(3)}</td><td class="n">${totals.meanAcceptedReward.toFixed(3)}</td></tr></table>
<h2>By category</h2>
${categoryChart(stats.byCategory)}
<table><tr><th>category</th><th>tasks</th><th>accepted tasks</th><th>acceptance</th><th>review</th><th>samples</th><th>accepted</th><th>mean reward</th><th>mean accepted</th>${reasonHeaders}</tr>
${categoryRows}
${categoryRow('all', totals)}
</table>
<h2>Model use and time</h2>
<table><tr><th>calls</th><th>retries</th><th>prompt tokens</th><th>completion tokens</th><th>model time</th><th>tool time (simulated)</th><th>parts' wall time</th><th>elapsed</th><th>episodes/s</th></tr>
<tr><td class="n">${totals.calls}</td><td class="n">${retries}</td><td class="n">${totals.promptTokens}</td><td class="n">${totals.completionTokens}</td><td class="n">${milliseconds(totals.modelMs)}</td><td class="n">${milliseconds(totals.toolMs)}</td><td class="n">${milliseconds(stats.time.partsMs)}</td><td class="n">${milliseconds(stats.time.elapsedMs)}</td><td class="n">${stats.time.episodesPerSecond.toFixed(1)}</td></tr></table>
<h2>For review (${review.total})</h2>
${
  review.total === 0
    ? '<p>Every task has an accepted trajectory.</p>'
    : `<p class="meta">Tasks none of whose samples was accepted${review.total > review.entries.length ? `; the first ${review.entries.length} shown, all in review.jsonl.gz` : ''}.</p>
<table><tr><th>task</th><th>category</th><th>attempts</th><th>why each sample was rejected</th></tr>
${reviewRows(review.entries)}
</table>`
}
</body></html>
`;
}
