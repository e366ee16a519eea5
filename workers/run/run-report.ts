import type { RunManifest, StageOutcome } from './run-manifest';

/** The run report: what people read first. Another issue adds stage-specific sections. */
export interface RunReport {
  schemaVersion: 1;
  runId: string;
  status: RunManifest['status'];
  createdAt: string;
  finishedAt: string;
  durationMs: number;
  totals: { stages: number; completed: number; failed: number; parts: number; objects: number; records: number };
  stages: StageOutcome[];
  /** The trainer handoff, when the run had one. */
  handoff?: RunManifest['handoff'];
  /** What `latest` inputs resolved to. */
  resolvedInputs?: RunManifest['resolvedInputs'];
}

export function buildRunReport(manifest: Omit<RunManifest, 'reportJsonUri' | 'reportHtmlUri'>): RunReport {
  const sum = (pick: (stage: StageOutcome) => number | undefined) => manifest.stages.reduce((total, stage) => total + (pick(stage) ?? 0), 0);
  return {
    schemaVersion: 1,
    runId: manifest.runId,
    status: manifest.status,
    createdAt: manifest.createdAt,
    finishedAt: manifest.finishedAt,
    durationMs: manifest.durationMs,
    totals: {
      stages: manifest.stages.length,
      completed: manifest.stages.filter((stage) => stage.status === 'completed').length,
      failed: manifest.stages.filter((stage) => stage.status === 'failed').length,
      parts: sum((stage) => stage.parts),
      objects: sum((stage) => stage.objects),
      records: sum((stage) => stage.records),
    },
    stages: manifest.stages,
    ...(manifest.handoff ? { handoff: manifest.handoff } : {}),
    ...(manifest.resolvedInputs ? { resolvedInputs: manifest.resolvedInputs } : {}),
  };
}

/** Paragraphs on the trainer handoff and the resolved `latest` inputs (empty without them). */
function runContextHtml(report: RunReport): string {
  const parts: string[] = [];
  const handoff = report.handoff;
  if (handoff) {
    const checkpoint = handoff.checkpoint ? ` on checkpoint <code>${escapeHtml(handoff.checkpoint.model)}</code> at <code>${escapeHtml(handoff.checkpoint.endpoint)}</code>` : '';
    const waited = handoff.waitedMs !== undefined ? `, after waiting ${escapeHtml(formatDuration(handoff.waitedMs))} for it` : '';
    parts.push(
      `<p>Trainer handoff after ${escapeHtml(handoff.after.join(', '))}: <b>${escapeHtml(handoff.status)}</b>; ${escapeHtml(handoff.before.join(', '))} ${handoff.status === 'completed' ? `ran${checkpoint}${waited}` : 'did not run'}.` +
        `${handoff.requestUri ? ` Training request: <code>${escapeHtml(handoff.requestUri)}</code>.` : ''}${handoff.error ? `<div class="error">${escapeHtml(handoff.error)}</div>` : ''}</p>`,
    );
  }
  for (const input of report.resolvedInputs ?? []) parts.push(`<p>Latest input <code>${escapeHtml(input.path)}</code>: ${escapeHtml(input.partition)}</p>`);
  return parts.join('\n');
}

const statusColors: Record<StageOutcome['status'], string> = {
  completed: '#2e7d32',
  failed: '#c62828',
  cancelled: '#6d6d6d',
  'not-run': '#9e9e9e',
};

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (character) => `&#${character.charCodeAt(0)};`);
}

function formatDuration(ms: number | undefined): string {
  if (ms === undefined) return '';
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1_000)} s`;
}

/** A bar per stage: its duration, colored by status. */
function durationChart(stages: StageOutcome[]): string {
  const rowHeight = 24;
  const labelWidth = 160;
  const barWidth = 420;
  const longest = Math.max(1, ...stages.map((stage) => stage.durationMs ?? 0));
  const rows = stages.map((stage, index) => {
    const y = index * rowHeight;
    const width = Math.max(2, Math.round(((stage.durationMs ?? 0) / longest) * barWidth));
    return (
      `<text x="0" y="${y + 16}" font-size="12">${escapeHtml(stage.name)}</text>` +
      `<rect x="${labelWidth}" y="${y + 4}" width="${width}" height="16" fill="${statusColors[stage.status]}"><title>${escapeHtml(stage.status)}</title></rect>` +
      `<text x="${labelWidth + width + 6}" y="${y + 16}" font-size="12">${escapeHtml(formatDuration(stage.durationMs) || stage.status)}</text>`
    );
  });
  const height = Math.max(rowHeight, stages.length * rowHeight);
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${labelWidth + barWidth + 90}" height="${height}" role="img" aria-label="stage durations">${rows.join('')}</svg>`;
}

/** A self-contained HTML page (no external assets): summary, stage table, duration chart. */
export function renderRunReportHtml(report: RunReport, links: { manifestUri: string }): string {
  const rows = report.stages
    .map(
      (stage) =>
        `<tr><td>${escapeHtml(stage.name)}</td><td style="color:${statusColors[stage.status]}">${escapeHtml(stage.status)}</td>` +
        `<td class="n">${stage.parts}</td><td class="n">${stage.objects ?? ''}</td><td class="n">${stage.records ?? ''}</td>` +
        `<td class="n">${escapeHtml(formatDuration(stage.durationMs))}</td>` +
        `<td>${stage.manifestUri ? `<code>${escapeHtml(stage.manifestUri)}</code>` : ''}${stage.error ? `<div class="error">${escapeHtml(stage.error)}</div>` : ''}</td></tr>`,
    )
    .join('\n');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>HAT run ${escapeHtml(report.runId)}</title>
<style>
body{font-family:system-ui,sans-serif;margin:2rem;color:#222}
table{border-collapse:collapse;margin:1rem 0}
th,td{border-bottom:1px solid #ddd;padding:.35rem .7rem;text-align:left;vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.error{color:#c62828;font-size:.9em;white-space:pre-wrap}
code{font-size:.85em}
</style></head>
<body>
<h1>Run <code>${escapeHtml(report.runId)}</code>: <span style="color:${report.status === 'completed' ? statusColors.completed : statusColors.failed}">${escapeHtml(report.status)}</span></h1>
<p>${escapeHtml(report.createdAt)} to ${escapeHtml(report.finishedAt)} (${escapeHtml(formatDuration(report.durationMs))}).
${report.totals.completed}/${report.totals.stages} stages completed, ${report.totals.parts} parts, ${report.totals.objects} objects, ${report.totals.records} records.
Run manifest: <code>${escapeHtml(links.manifestUri)}</code></p>
${runContextHtml(report)}
<table><thead><tr><th>stage</th><th>status</th><th>parts</th><th>objects</th><th>records</th><th>duration</th><th>manifest / error</th></tr></thead>
<tbody>
${rows}
</tbody></table>
<h2>Stage durations</h2>
${durationChart(report.stages)}
</body></html>
`;
}
