import { formatFigure, type StageFigure } from '../../queues/stage-kit/stage-summary';
import type { RunManifest, StageOutcome } from './run-manifest';
import { runOrderHtml } from './run-order-html';
import { escapeHtml } from '../../shared/report/html';

/** The run report: what people read first; each completed stage carries its key figures and report links. */
export interface RunReport {
  schemaVersion: 1;
  runId: string;
  status: RunManifest['status'];
  createdAt: string;
  finishedAt: string;
  durationMs: number;
  totals: {
    stages: number;
    completed: number;
    held: number;
    failed: number;
    parts: number;
    objects: number;
    records: number;
  };
  stages: StageOutcome[];
  /** The trainer handoffs in chain order, when the run had any. */
  handoffs?: RunManifest['handoffs'];
  /** What `latest` inputs resolved to. */
  resolvedInputs?: RunManifest['resolvedInputs'];
  /** The promotion gate's decision. */
  gate?: RunManifest['gate'];
}

export function buildRunReport(manifest: Omit<RunManifest, 'reportJsonUri' | 'reportHtmlUri'>): RunReport {
  const sum = (pick: (stage: StageOutcome) => number | undefined) =>
    manifest.stages.reduce((total, stage) => total + (pick(stage) ?? 0), 0);
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
      held: manifest.stages.filter((stage) => stage.status === 'held').length,
      failed: manifest.stages.filter((stage) => stage.status === 'failed').length,
      parts: sum((stage) => stage.parts),
      objects: sum((stage) => stage.objects),
      records: sum((stage) => stage.records),
    },
    stages: manifest.stages,
    ...(manifest.handoffs ? { handoffs: manifest.handoffs } : {}),
    ...(manifest.resolvedInputs ? { resolvedInputs: manifest.resolvedInputs } : {}),
    ...(manifest.gate ? { gate: manifest.gate } : {}),
  };
}

/** Paragraphs on the trainer handoffs and the resolved `latest` inputs (empty without them). */
function runContextHtml(report: RunReport): string {
  const parts: string[] = [];
  for (const handoff of report.handoffs ?? []) {
    const served = handoff.checkpoint?.endpoint
      ? ` at <code>${escapeHtml(handoff.checkpoint.endpoint)}</code>`
      : handoff.checkpoint?.modelDir
        ? ` from <code>${escapeHtml(handoff.checkpoint.modelDir)}</code>`
        : '';
    const checkpoint = handoff.checkpoint
      ? ` on checkpoint <code>${escapeHtml(handoff.checkpoint.model ?? handoff.checkpoint.modelDir ?? '')}</code>${served}`
      : '';
    const waited =
      handoff.waitedMs !== undefined ? `, after waiting ${escapeHtml(formatDuration(handoff.waitedMs))} for it` : '';
    parts.push(
      `<p>Trainer handoff ${escapeHtml(handoff.name)} after ${escapeHtml(handoff.after.join(', '))}: <b>${escapeHtml(handoff.status)}</b>; ${escapeHtml(handoff.before.join(', '))} ${handoff.status === 'completed' ? `ran${checkpoint}${waited}` : 'did not run'}.` +
        `${handoff.requestUri ? ` Training request: <code>${escapeHtml(handoff.requestUri)}</code>.` : ''}${handoff.error ? `<div class="error">${escapeHtml(handoff.error)}</div>` : ''}</p>`,
    );
  }
  const gate = report.gate;
  if (gate) {
    parts.push(
      `<p class="gate-${gate.decision}">Promotion gate: <b>${gate.decision === 'promote' ? 'promoted' : 'held'} ${escapeHtml(gate.candidate)}</b>` +
        `${gate.decision === 'promote' ? (gate.promoted ? '; it is now the promoted checkpoint (what latestCheckpoint resolves to next)' : ' (pointer not written: promote: false)') : '; the promoted checkpoint did not move'}` +
        `${gate.skipped.length > 0 ? `; not run: ${escapeHtml(gate.skipped.join(', '))}` : ''}.</p><ul>${gate.reasons.map((reason) => `<li>${escapeHtml(reason)}</li>`).join('')}</ul>`,
    );
  }
  for (const input of report.resolvedInputs ?? [])
    parts.push(`<p>Latest input <code>${escapeHtml(input.path)}</code>: ${escapeHtml(input.partition)}</p>`);
  return parts.join('\n');
}

const toneColors: Record<NonNullable<StageFigure['tone']>, string> = {
  pass: '#2e7d32',
  warn: '#b26a00',
  fail: '#c62828',
};

/**
 * The link to a stage report from the run report, relative to the run's folder
 * (`runs/<runId>/`, where the run report lies): a browser opens it from a local copy, from
 * `hat dashboard`, or from a bucket served over HTTP. Undefined for anything outside the run.
 */
export function relativeToRun(uri: string, runRootUri: string | undefined): string | undefined {
  if (/^https?:\/\//.test(uri)) return uri;
  if (!runRootUri || !uri.startsWith(`${runRootUri}/`)) return undefined;
  return uri
    .slice(runRootUri.length + 1)
    .split('/')
    .map(encodeURIComponent)
    .join('/');
}

/** Per completed stage: its key figures (value colored by tone) and links to its own reports. */
function keyFiguresHtml(stages: StageOutcome[], runRootUri: string | undefined): string {
  const sections = stages
    .filter((stage) => (stage.figures?.length ?? 0) > 0 || (stage.links?.length ?? 0) > 0)
    .map((stage) => {
      const rows = (stage.figures ?? [])
        .map((figure) => {
          const color = figure.tone ? ` style="color:${toneColors[figure.tone]};font-weight:600"` : '';
          return `<tr><td>${escapeHtml(figure.label)}</td><td class="n"${color}>${escapeHtml(formatFigure(figure))}</td><td class="detail">${escapeHtml(figure.detail ?? '')}</td></tr>`;
        })
        .join('\n');
      const links = (stage.links ?? [])
        .map((link) => {
          const href = relativeToRun(link.uri, runRootUri);
          return `<li>${href ? `<a href="${escapeHtml(href)}">${escapeHtml(link.label)}</a>` : escapeHtml(link.label)}: <code>${escapeHtml(link.uri)}</code></li>`;
        })
        .join('');
      return `<section><h3>${escapeHtml(stage.name)}</h3>${rows ? `<table class="figures"><tbody>\n${rows}\n</tbody></table>` : ''}${links ? `<ul>${links}</ul>` : ''}</section>`;
    });
  return sections.length > 0 ? `<h2>Key figures</h2>\n${sections.join('\n')}` : '';
}

/** A bar per rate figure (acceptance rate, check pass rates) on one 0–100% scale; empty without any. */
function ratesChart(stages: StageOutcome[]): string {
  const rates = stages.flatMap((stage) =>
    (stage.figures ?? [])
      .filter((figure) => figure.unit === 'ratio' && typeof figure.value === 'number')
      .map((figure) => ({ stage: stage.name, figure })),
  );
  if (rates.length === 0) return '';
  const rowHeight = 24;
  const labelWidth = 260;
  const barWidth = 360;
  const rows = rates.map(({ stage, figure }, index) => {
    const y = index * rowHeight;
    const value = Math.min(1, Math.max(0, figure.value as number));
    const color = figure.tone ? toneColors[figure.tone] : '#1565c0';
    return (
      `<text x="0" y="${y + 16}" font-size="12">${escapeHtml(`${stage}: ${figure.label}`)}</text>` +
      `<rect x="${labelWidth}" y="${y + 4}" width="${barWidth}" height="16" fill="#eee"/>` +
      `<rect x="${labelWidth}" y="${y + 4}" width="${Math.max(1, Math.round(value * barWidth))}" height="16" fill="${color}"><title>${escapeHtml(figure.detail ?? figure.label)}</title></rect>` +
      `<text x="${labelWidth + barWidth + 6}" y="${y + 16}" font-size="12">${escapeHtml(formatFigure(figure))}</text>`
    );
  });
  return `<h2>Rates</h2>\n<svg xmlns="http://www.w3.org/2000/svg" width="${labelWidth + barWidth + 70}" height="${rates.length * rowHeight}" role="img" aria-label="rates">${rows.join('')}</svg>`;
}

const statusColors: Record<StageOutcome['status'], string> = {
  completed: '#2e7d32',
  held: '#b26a00',
  failed: '#c62828',
  cancelled: '#6d6d6d',
  'not-run': '#9e9e9e',
};

/** A stage a hold kept from running: why is a decision, not an error. */
function isHeldBack(stage: StageOutcome): boolean {
  return stage.status === 'not-run' && (stage.error?.startsWith('held by the ') ?? false);
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
export function renderRunReportHtml(report: RunReport, links: { manifestUri: string; runRootUri?: string }): string {
  const rows = report.stages
    .map(
      (stage) =>
        `<tr><td>${escapeHtml(stage.name)}</td><td style="color:${statusColors[stage.status]}">${escapeHtml(stage.status)}</td>` +
        `<td class="n">${stage.parts}</td><td class="n">${stage.objects ?? ''}</td><td class="n">${stage.records ?? ''}</td>` +
        `<td class="n">${escapeHtml(formatDuration(stage.durationMs))}</td>` +
        `<td>${stage.manifestUri ? `<code>${escapeHtml(stage.manifestUri)}</code>` : ''}${stage.note ? `<div class="note">${escapeHtml(stage.note)}</div>` : ''}` +
        `${stage.error ? `<div class="${isHeldBack(stage) ? 'note' : 'error'}">${escapeHtml(stage.error)}</div>` : ''}</td></tr>`,
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
.note{color:#b26a00;font-size:.9em;white-space:pre-wrap}
td.detail{color:#555;font-size:.9em}
h3{margin:1.2rem 0 .2rem}
code{font-size:.85em}
</style></head>
<body>
<h1>Run <code>${escapeHtml(report.runId)}</code>: <span style="color:${report.status === 'completed' ? statusColors.completed : statusColors.failed}">${escapeHtml(report.status)}</span></h1>
<p>${escapeHtml(report.createdAt)} to ${escapeHtml(report.finishedAt)} (${escapeHtml(formatDuration(report.durationMs))}).
${report.totals.completed}/${report.totals.stages} stages completed${report.totals.held > 0 ? `, ${report.totals.held} held` : ''}, ${report.totals.parts} parts, ${report.totals.objects} objects, ${report.totals.records} records.
Run manifest: <code>${escapeHtml(links.manifestUri)}</code></p>
${runContextHtml(report)}
${runOrderHtml(report)}
<table><thead><tr><th>stage</th><th>status</th><th>parts</th><th>objects</th><th>records</th><th>duration</th><th>manifest / error</th></tr></thead>
<tbody>
${rows}
</tbody></table>
${keyFiguresHtml(report.stages, links.runRootUri)}
${ratesChart(report.stages)}
<h2>Stage durations</h2>
${durationChart(report.stages)}
</body></html>
`;
}
