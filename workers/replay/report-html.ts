import { formatPercent } from '../../shared/metrics/format-percent';
import { percentileOfSorted, sortedSamples } from '../../shared/metrics/percentile';
import { SampleSet } from '../../shared/metrics/sample-set';
import type { ReplayReport } from './replay-report';
import { escapeHtml } from '../../shared/report/html';

/**
 * The replay report as one self-contained HTML page: no scripts, styles or fonts from the
 * network, charts as inline SVG (a histogram and a CDF per metric). The target label, with its
 * warning when it is a test server, a dummy-weight model or a simulation, comes first.
 */
export function renderReplayHtml(report: ReplayReport): string {
  const samples = SampleSet.fromJSON(report.samples, 'report.samples');
  const target = report.target;
  const sections: string[] = [];
  sections.push(
    `<header><h1>Replay report</h1><p class="target">${escapeHtml(target.label)}</p>${
      target.warning
        ? `<p class="warning">⚠ ${escapeHtml(target.warning)}. These figures measure the pipeline, not a model.</p>`
        : ''
    }${servingLine(report)}<p class="meta">run ${escapeHtml(report.runId)} · ${escapeHtml(report.mode)} · ${escapeHtml(loadText(report))} · ${report.parts} part(s) · started ${escapeHtml(report.window.startedAt)} · ${(report.window.durationMs / 1000).toFixed(2)} s · warmup ${report.warmup.sessions} session(s)</p></header>`,
  );
  sections.push(sloSection(report));
  sections.push(viewerTurnSection(report));
  sections.push(countsSection(report));
  sections.push(summaryTable(report));
  sections.push(specDecodeSection(report));
  if (report.live) {
    const live = report.live;
    sections.push(
      `<section><h2>Live divergence</h2><table><tr><th>steps compared</th><th>diverged</th><th>rate</th><th>tool name</th><th>arguments</th><th>sessions diverged</th></tr><tr><td>${live.steps}</td><td>${live.divergedSteps}</td><td>${live.divergenceRate === null ? '–' : percentText(live.divergenceRate)}</td><td>${live.toolNameDivergences}</td><td>${live.argumentDivergences}</td><td>${live.sessionsDiverged}</td></tr></table></section>`,
    );
  }
  const charts = Object.entries(report.metrics)
    .filter(([name]) => samples.count(name) > 0)
    .map(([name, metric]) => {
      const sorted = sortedSamples(samples.get(name));
      return `<figure><figcaption><b>${escapeHtml(name)}</b> (${escapeHtml(metric.unit)}, ${metric.summary.count} samples): ${escapeHtml(metric.description)}</figcaption>${histogramSvg(sorted, metric.unit)}${cdfSvg(sorted, metric.unit)}</figure>`;
    });
  sections.push(`<section><h2>Distributions</h2>${charts.join('\n')}</section>`);
  if (report.failures.length > 0) {
    sections.push(
      `<section><h2>Failed calls</h2><table><tr><th>code</th><th>count</th><th>example</th></tr>${report.failures
        .map(
          (failure) =>
            `<tr><td>${escapeHtml(failure.code)}</td><td>${failure.count}</td><td>${escapeHtml(failure.example)}</td></tr>`,
        )
        .join('')}</table></section>`,
    );
  }
  if (report.unreplayable.length > 0) {
    sections.push(
      `<section><h2>Sessions not replayed (${report.unreplayable.length})</h2><table><tr><th>session</th><th>reason</th><th>detail</th><th>source</th></tr>${report.unreplayable
        .slice(0, 500)
        .map(
          (item) =>
            `<tr><td>${escapeHtml(item.sessionId ?? '–')}</td><td>${escapeHtml(item.reason)}</td><td>${escapeHtml(item.detail)}</td><td>${escapeHtml(item.source)}</td></tr>`,
        )
        .join('')}</table></section>`,
    );
  }
  if (report.notes.length > 0)
    sections.push(
      `<section><h2>Notes</h2><ul>${report.notes.map((note) => `<li>${escapeHtml(note)}</li>`).join('')}</ul></section>`,
    );
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Replay report ${escapeHtml(report.runId)}</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d2330;max-width:1200px}
h1{margin:0 0 4px}h2{margin-top:28px;border-bottom:1px solid #ccd;padding-bottom:4px}
.target{font-size:18px;font-weight:600;margin:4px 0}.warning{background:#fde8e8;border:2px solid #c0392b;color:#7b1d12;padding:8px 12px;font-weight:600}
.meta{color:#556}table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #d5d8e0;padding:3px 8px;text-align:right}th{background:#f1f3f7}
td:first-child,th:first-child{text-align:left}.pass{color:#1e7b34;font-weight:700}.fail{color:#b3261e;font-weight:700}.nodata{color:#8a6d00;font-weight:700}
figure{margin:16px 0}figcaption{margin-bottom:4px}svg{margin-right:12px;background:#fbfbfd;border:1px solid #e3e5ea}
</style></head><body>
${sections.join('\n')}
</body></html>
`;
}

/** Hardware, engine, version, context length and serving flags: what two reports must share to compare. */
export function servingFacts(target: ReplayReport['target']): Array<[string, string]> {
  const server = target.server;
  const facts: Array<[string, string]> = [['hardware', target.hardware ?? 'not recorded (set target.hardware)']];
  if (server?.engine !== undefined)
    facts.push(['engine', `${server.engine}${server.version !== undefined ? ` ${server.version}` : ''}`]);
  const models = server?.models ?? [];
  if (models.length > 0)
    facts.push([
      'served model',
      models
        .map((model) => `${model.id}${model.maxModelLen !== undefined ? ` (max_model_len ${model.maxModelLen})` : ''}`)
        .join(', '),
    ]);
  const flags = { ...(server?.settings ?? {}), ...(target.serving ?? {}) };
  facts.push([
    'serving',
    Object.keys(flags).length > 0
      ? Object.entries(flags)
          .map(([key, value]) => `${key}=${String(value)}`)
          .join(', ')
      : 'not recorded (set target.serving)',
  ]);
  if ((server?.specDecodeMetrics ?? []).length > 0)
    facts.push(['spec-decode metrics', (server?.specDecodeMetrics ?? []).join(', ')]);
  if ((server?.unreadable ?? []).length > 0) facts.push(['not readable', (server?.unreadable ?? []).join('; ')]);
  return facts;
}

function servingLine(report: ReplayReport): string {
  return `<p class="meta">${servingFacts(report.target)
    .map(([key, value]) => `<b>${escapeHtml(key)}</b>: ${escapeHtml(value)}`)
    .join(' · ')}</p>`;
}

function loadText(report: ReplayReport): string {
  const load = report.load;
  if (load.kind === 'closed') return `closed loop, ${load.concurrency} concurrent session(s)`;
  return `open loop, ${load.rate} session(s)/s, burstiness ${load.burstiness}${load.maxConcurrency !== undefined ? `, at most ${load.maxConcurrency} in flight` : ''}`;
}

function sloSection(report: ReplayReport): string {
  const slo = report.slo;
  const verdictClass = slo.verdict === 'pass' ? 'pass' : slo.verdict === 'fail' ? 'fail' : 'nodata';
  const rows = slo.objectives
    .map(
      (objective) =>
        `<tr><td>${escapeHtml(objective.metric)}</td><td>P${objective.percentile}</td><td>${numberText(objective.maxMs)}</td><td>${objective.observed === null ? '–' : numberText(objective.observed)}</td><td class="${objective.pass === null ? 'nodata' : objective.pass ? 'pass' : 'fail'}">${objective.pass === null ? 'no data' : objective.pass ? 'pass' : 'fail'}</td></tr>`,
    )
    .join('');
  const goodput = (['requests', 'turns', 'sessions'] as const)
    .flatMap((scope) => {
      const figure = slo.goodput[scope];
      if (!figure) return [];
      const thresholds = Object.entries(figure.thresholds)
        .map(([metric, limit]) => `${metric} ≤ ${numberText(limit)}`)
        .join(', ');
      return [
        `<tr><td>${scope}</td><td>${escapeHtml(thresholds)}</td><td>${figure.good} / ${figure.total}</td><td>${percentText(figure.share)}</td><td>${figure.perSecond.toFixed(3)}/s</td></tr>`,
      ];
    })
    .join('');
  return `<section><h2>SLO verdict: <span class="${verdictClass}">${slo.verdict.toUpperCase()}</span></h2><table><tr><th>metric</th><th>percentile</th><th>limit</th><th>observed</th><th>verdict</th></tr>${rows}</table>${
    goodput
      ? `<table><tr><th>goodput</th><th>thresholds</th><th>good</th><th>share</th><th>rate</th></tr>${goodput}</table>`
      : ''
  }</section>`;
}

/** What a viewer waits per question, with the turn's tool time beside its model time. */
function viewerTurnSection(report: ReplayReport): string {
  const rows = [
    ['first answer text (speech can start), from the viewer message', 'turn_first_token_from_intended_ms'],
    ['whole answer, from the viewer message', 'turn_response_from_intended_ms'],
    ['first answer text, from the first dispatch', 'turn_first_token_ms'],
    ['whole answer, from the first dispatch', 'turn_response_ms'],
    ['model calls per turn', 'turn_calls'],
    ['tool time per turn', 'turn_tool_ms'],
    ['model time per turn (sum of E2EL)', 'turn_model_ms'],
  ].flatMap(([label, name]) => {
    const metric = report.metrics[name];
    if (!metric || metric.summary.count === 0) return [];
    const p = metric.summary.percentiles;
    return [
      `<tr><td>${escapeHtml(label)}</td><td>${escapeHtml(name)}</td><td>${optionalNumber(metric.summary.mean)}</td><td>${optionalNumber(p.p50 ?? null)}</td><td>${optionalNumber(p.p95 ?? null)}</td><td>${optionalNumber(p.p99 ?? null)}</td></tr>`,
    ];
  });
  if (rows.length === 0) return '<section><h2>Viewer turns</h2><p>No viewer turn was answered.</p></section>';
  const counts = report.counts;
  return `<section><h2>Viewer turns</h2><p>${counts.turns ?? 0} turn(s) answered${counts.turnsFailed ? `, ${counts.turnsFailed} cut off` : ''}. A turn: a viewer message, the agent's model and tool calls, the final answer.</p><table><tr><th>what the viewer waits</th><th>metric</th><th>mean</th><th>P50</th><th>P95</th><th>P99</th></tr>${rows.join('')}</table></section>`;
}

function countsSection(report: ReplayReport): string {
  const counts = report.counts;
  const throughput = report.throughput;
  return `<section><h2>Counts</h2><table><tr><th>sessions</th><th>failed</th><th>calls</th><th>failed</th><th>not replayable</th><th>tokens estimated</th><th>requests/s</th><th>sessions/s</th><th>output tokens/s</th></tr><tr><td>${counts.sessions}</td><td>${counts.sessionsFailed}</td><td>${counts.calls}</td><td>${counts.callsFailed}</td><td>${counts.unreplayable}</td><td>${counts.outputTokensEstimated}</td><td>${throughput.requestsPerSecond.toFixed(2)}</td><td>${throughput.sessionsPerSecond.toFixed(3)}</td><td>${throughput.outputTokensPerSecond.toFixed(1)}</td></tr></table><p class="meta">replay client event loop: lateness P99 ${report.client.eventLoopDelayP99Ms.toFixed(2)} ms, max ${report.client.eventLoopDelayMaxMs.toFixed(1)} ms, busy ${(report.client.eventLoopUtilization * 100).toFixed(0)}%</p></section>`;
}

function summaryTable(report: ReplayReport): string {
  const keys = report.percentiles.map((p) => `p${p}`);
  const rows = Object.entries(report.metrics)
    .map(([name, metric]) => {
      const summary = metric.summary;
      return `<tr><td>${escapeHtml(name)}</td><td>${metric.scope}</td><td>${summary.count}</td><td>${optionalNumber(summary.mean)}</td>${keys.map((key) => `<td>${optionalNumber(summary.percentiles[key] ?? null)}</td>`).join('')}<td>${optionalNumber(summary.max)}</td></tr>`;
    })
    .join('');
  return `<section><h2>Percentiles</h2><table><tr><th>metric</th><th>scope</th><th>count</th><th>mean</th>${keys.map((key) => `<th>${key.toUpperCase()}</th>`).join('')}<th>max</th></tr>${rows}</table></section>`;
}

function specDecodeSection(report: ReplayReport): string {
  const spec = report.specDecode;
  if (!spec.available)
    return `<section><h2>Speculative decoding</h2><p>Not available: ${escapeHtml(spec.note)}.</p></section>`;
  const positions = (spec.perPositionAcceptanceRate ?? [])
    .map(
      (rate, position) =>
        `<tr><td>position ${position}</td><td>${spec.acceptedPerPosition?.[position] ?? 0}</td><td>${percentText(rate)}</td></tr>`,
    )
    .join('');
  return `<section><h2>Speculative decoding</h2><table><tr><th>drafts</th><th>draft tokens</th><th>accepted tokens</th><th>acceptance rate</th><th>acceptance length</th></tr><tr><td>${spec.drafts}</td><td>${spec.draftTokens}</td><td>${spec.acceptedTokens}</td><td>${
    spec.acceptanceRate === null || spec.acceptanceRate === undefined ? '–' : percentText(spec.acceptanceRate)
  }</td><td>${spec.acceptanceLength === null || spec.acceptanceLength === undefined ? '–' : spec.acceptanceLength.toFixed(3)}</td></tr></table><table><tr><th>draft position</th><th>accepted</th><th>rate (of drafts)</th></tr>${positions}</table><p>${escapeHtml(spec.note)}.</p></section>`;
}

const width = 520;
const height = 220;
const margin = { left: 56, right: 12, top: 12, bottom: 34 };
const plotWidth = width - margin.left - margin.right;
const plotHeight = height - margin.top - margin.bottom;

/** 40 bins from the minimum; a heavy tail beyond 3x P99 is folded into the last bin (labelled). */
function histogramSvg(sorted: Float64Array, unit: string): string {
  const low = sorted[0];
  const max = sorted[sorted.length - 1];
  const p99 = percentileOfSorted(sorted, 99);
  const high = max > 3 * p99 && p99 > low ? p99 * 1.5 : max;
  const binCount = 40;
  const span = high - low || 1;
  const bins = new Array<number>(binCount).fill(0);
  let folded = 0;
  for (const value of sorted) {
    if (value > high) folded++;
    bins[Math.min(binCount - 1, Math.floor(((Math.min(value, high) - low) / span) * binCount))] += 1;
  }
  const tallest = Math.max(...bins);
  const barWidth = plotWidth / binCount;
  const bars = bins
    .map((count, index) => {
      const barHeight = tallest > 0 ? (count / tallest) * plotHeight : 0;
      return `<rect x="${(margin.left + index * barWidth).toFixed(1)}" y="${(margin.top + plotHeight - barHeight).toFixed(1)}" width="${Math.max(0.5, barWidth - 1).toFixed(1)}" height="${barHeight.toFixed(1)}" fill="#4a6fa5"><title>${numberText(low + (index * span) / binCount)}–${numberText(low + ((index + 1) * span) / binCount)}: ${count}</title></rect>`;
    })
    .join('');
  const foldNote =
    folded > 0
      ? `<text x="${width - margin.right}" y="${margin.top + 10}" text-anchor="end" font-size="10">${folded} above ${numberText(high)} in the last bin</text>`
      : '';
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" role="img" aria-label="histogram">${bars}${axes(low, high, 0, tallest, unit, 'count')}${foldNote}</svg>`;
}

/** Empirical CDF, at most 400 points (evenly spaced ranks). */
function cdfSvg(sorted: Float64Array, unit: string): string {
  const low = sorted[0];
  const high = sorted[sorted.length - 1];
  const span = high - low || 1;
  const points: string[] = [];
  const steps = Math.min(400, sorted.length);
  for (let step = 0; step < steps; step++) {
    const rank = steps === 1 ? sorted.length - 1 : Math.round((step / (steps - 1)) * (sorted.length - 1));
    const x = margin.left + ((sorted[rank] - low) / span) * plotWidth;
    const y = margin.top + plotHeight - ((rank + 1) / sorted.length) * plotHeight;
    points.push(`${x.toFixed(1)},${y.toFixed(1)}`);
  }
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" role="img" aria-label="CDF"><polyline fill="none" stroke="#b3541e" stroke-width="1.5" points="${points.join(' ')}"/>${axes(low, high, 0, 1, unit, 'share')}</svg>`;
}

function axes(xLow: number, xHigh: number, yLow: number, yHigh: number, unit: string, yLabel: string): string {
  const parts = [
    `<line x1="${margin.left}" y1="${margin.top + plotHeight}" x2="${margin.left + plotWidth}" y2="${margin.top + plotHeight}" stroke="#333"/>`,
    `<line x1="${margin.left}" y1="${margin.top}" x2="${margin.left}" y2="${margin.top + plotHeight}" stroke="#333"/>`,
  ];
  for (let tick = 0; tick <= 4; tick++) {
    const x = margin.left + (tick / 4) * plotWidth;
    const y = margin.top + plotHeight - (tick / 4) * plotHeight;
    parts.push(
      `<text x="${x.toFixed(1)}" y="${margin.top + plotHeight + 14}" text-anchor="middle" font-size="10">${numberText(xLow + ((xHigh - xLow) * tick) / 4)}</text>`,
    );
    const yValue = yLow + ((yHigh - yLow) * tick) / 4;
    parts.push(
      `<text x="${margin.left - 4}" y="${(y + 3).toFixed(1)}" text-anchor="end" font-size="10">${yLabel === 'count' ? String(Number(yValue.toFixed(1))) : numberText(yValue)}</text>`,
    );
  }
  parts.push(
    `<text x="${margin.left + plotWidth / 2}" y="${height - 4}" text-anchor="middle" font-size="11">${escapeHtml(unit)}</text>`,
  );
  parts.push(
    `<text x="12" y="${margin.top + plotHeight / 2}" text-anchor="middle" font-size="11" transform="rotate(-90 12 ${margin.top + plotHeight / 2})">${yLabel}</text>`,
  );
  return parts.join('');
}

function numberText(value: number): string {
  const magnitude = Math.abs(value);
  if (magnitude >= 1000) return value.toFixed(0);
  if (magnitude >= 10) return value.toFixed(1);
  return value.toFixed(magnitude >= 1 ? 2 : 3);
}

function optionalNumber(value: number | null): string {
  return value === null ? '–' : numberText(value);
}

function percentText(share: number): string {
  return formatPercent(share);
}
