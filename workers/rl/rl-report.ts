import { formatPercent } from '../../shared/metrics/format-percent';
import { escapeHtml } from '../../shared/report/html';
import type { PassAtKEntry, RewardSummary, RlStats } from './rl-stats';

/**
 * The rl stage's HTML report: one self-contained page (inline CSS and SVG, no scripts, nothing
 * fetched) with the counts, reward by component, by task category and by HSA family, pass@k per
 * k, and the canonical-versus-variant reward gap.
 */

const number = (value: number | null | undefined, digits = 3): string =>
  value === null || value === undefined ? '–' : value.toFixed(digits);
const percent = (value: number | null | undefined): string =>
  value === null || value === undefined ? '–' : formatPercent(value);

/** A horizontal bar for a value in [0, 1]. */
function bar(value: number | null): string {
  if (value === null) return '';
  const width = Math.round(Math.max(0, Math.min(1, value)) * 120);
  return `<svg width="124" height="12" role="img" aria-label="${number(value)}"><rect x="0" y="1" width="120" height="10" fill="#eee"/><rect x="0" y="1" width="${width}" height="10" fill="#3b7dd8"/></svg>`;
}

function summaryCells(summary: RewardSummary, components: string[]): string {
  return `<td>${summary.episodes}</td><td>${number(summary.mean)} ${bar(summary.mean)}</td><td>${number(summary.std)}</td><td>${percent(summary.passRate)}</td>${components.map((name) => `<td>${number(summary.components[name] ?? null)}</td>`).join('')}`;
}

function summaryTable(rows: Array<[string, RewardSummary]>, components: string[]): string {
  const head = `<tr><th></th><th>episodes</th><th>mean reward</th><th>std</th><th>pass rate</th>${components.map((name) => `<th>${escapeHtml(name)}</th>`).join('')}</tr>`;
  return `<table>${head}${rows.map(([label, summary]) => `<tr><th>${escapeHtml(label)}</th>${summaryCells(summary, components)}</tr>`).join('')}</table>`;
}

function passTable(passAtK: RlStats['passAtK']): string {
  const ks = passAtK.all.map((entry) => entry.k);
  const row = (label: string, entries: PassAtKEntry[]) =>
    `<tr><th>${label}</th>${entries.map((entry) => `<td title="${entry.groups} groups">${percent(entry.value)}</td>`).join('')}</tr>`;
  return `<table><tr><th></th>${ks.map((k) => `<th>pass@${k}</th>`).join('')}</tr>${row('all', passAtK.all)}${row('canonical', passAtK.canonical)}${row('variant', passAtK.variant)}<tr><th>groups</th>${passAtK.all.map((entry) => `<td>${entry.groups}</td>`).join('')}</tr></table>`;
}

function countsTable(record: Record<string, number>): string {
  const entries = Object.entries(record);
  return `<table><tr>${entries.map(([name]) => `<th>${escapeHtml(name)}</th>`).join('')}</tr><tr>${entries.map(([, value]) => `<td>${value}</td>`).join('')}</tr></table>`;
}

export interface RlReportInput {
  runId: string;
  stats: RlStats;
}

export function rlReportHtml(input: RlReportInput): string {
  const { stats } = input;
  const components = Object.keys(stats.reward.all.components);
  const gap = stats.canonicalVariantGap;
  const settings = stats.settings;
  const simulated = !stats.policy.simulated
    ? ''
    : stats.policy.provider === 'scripted'
      ? '<p class="warning">The policy is a simulation (the stochastic scripted policy): these figures test the pipeline, not a model.</p>'
      : '<p class="warning">The policy model has random (dummy) weights: these figures test the pipeline, not a model.</p>';
  const exact = stats.tokenExact;
  const tokenExact = exact
    ? `<h2>Token-exact sampling</h2>
<p class="meta">records hold the ids as sampled from ${escapeHtml(stats.policy.provider)} (rollout logprobs: ${escapeHtml(JSON.stringify(stats.policy.logprobDistribution ?? null))}); drift = a fresh render of the conversation differs from the as-sampled ids (the as-sampled ids are kept)</p>
${countsTable({ episodes: exact.episodes, turns: exact.turns, 'sampled tokens': exact.sampledTokens, drifted: exact.drifted, 'drift tokens': exact.driftTokens, unchecked: exact.unchecked, 'turns with malformed tool calls': exact.malformedTurns, 'turns cut by maxTokens': exact.truncatedTurns })}`
    : stats.policy.tokenExact === false
      ? '<p class="meta">token_exact: false — the policy is a chat endpoint; tokens are the conversation re-tokenized, not the ids it sampled.</p>'
      : '';
  const categoryRows = Object.entries(stats.byCategory).map(
    ([category, summaries]) =>
      `<tr><th>${escapeHtml(category)}</th>${summaryCells(summaries.all, components)}<td>${number(summaries.canonical.mean)}</td><td>${number(summaries.variant.mean)}</td></tr>`,
  );
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>RL episode groups · ${escapeHtml(input.runId)}</title>
<style>
body{font-family:system-ui,-apple-system,"PingFang SC","Noto Sans CJK SC",sans-serif;margin:24px;color:#1b1b1b;max-width:1400px}
table{border-collapse:collapse;margin:8px 0 24px}th,td{border:1px solid #ccc;padding:4px 8px;text-align:right;font-size:13px}th{background:#f4f4f4}tr th:first-child{text-align:left}
.meta{color:#666;font-size:12px}.warning{background:#fff4d6;border:1px solid #e0b400;padding:8px;border-radius:4px}
.gap{font-size:20px;margin:8px 0}.gap b{font-size:28px}
</style></head><body>
<h1>RL episode groups</h1>
<p class="meta">run ${escapeHtml(input.runId)} · policy ${escapeHtml(stats.policy.modelId)} (${escapeHtml(stats.policy.provider)}) · tokenizer ${escapeHtml(stats.tokenizer.name)} (${escapeHtml(stats.tokenizer.fingerprint.slice(0, 12))}) · G = ${escapeHtml(String(settings.groupSize))} · seed ${escapeHtml(String(settings.seed))} · pass threshold ${escapeHtml(String(settings.passThreshold))} · advantage ${escapeHtml(JSON.stringify(settings.advantage))} (sample std)</p>
${simulated}
${tokenExact}
<h2>Canonical vs variant harness</h2>
<p class="gap">gap (canonical − variant mean reward): <b>${number(gap.gap)}</b> ± ${number(gap.standardError)} (standard error)</p>
<table><tr><th></th><th>groups</th><th>episodes</th><th>mean reward</th><th>pass@1</th></tr>
<tr><th>canonical</th><td>${gap.canonicalGroups}</td><td>${gap.canonicalEpisodes}</td><td>${number(gap.canonicalMean)}</td><td>${percent(stats.passAtK.canonical[0]?.value)}</td></tr>
<tr><th>variant</th><td>${gap.variantGroups}</td><td>${gap.variantEpisodes}</td><td>${number(gap.variantMean)}</td><td>${percent(stats.passAtK.variant[0]?.value)}</td></tr></table>
<p class="meta">category-matched gap ${number(gap.categoryMatchedGap)} over ${gap.categoriesMatched} categories · pass@1 gap ${number(gap.passAt1Gap)}</p>
<h2>Counts</h2>
<h3>Groups</h3>${countsTable(stats.counts.groups)}
<h3>Episodes by status</h3>${countsTable({ played: stats.counts.episodes.played, written: stats.counts.episodes.written, scored: stats.counts.episodes.scored, ...stats.counts.episodes.byStatus })}
${Object.keys(stats.counts.episodes.tokenViewFailures).length > 0 ? `<h3>Token views that failed</h3>${countsTable(stats.counts.episodes.tokenViewFailures)}` : ''}
<p class="meta">${stats.counts.steps} environment steps · ${stats.counts.tokens.total} tokens written, ${stats.counts.tokens.trained} trained · advantage |mean| ${number(stats.advantage.meanAbs)}, zero ${percent(stats.advantage.zeroShare)}</p>
<h2>Reward by component</h2>
${summaryTable(
  [
    ['all', stats.reward.all],
    ['canonical', stats.reward.canonical],
    ['variant', stats.reward.variant],
  ],
  components,
)}
<h2>Reward by task category</h2>
<table><tr><th></th><th>episodes</th><th>mean reward</th><th>std</th><th>pass rate</th>${components.map((name) => `<th>${escapeHtml(name)}</th>`).join('')}<th>canonical</th><th>variant</th></tr>
${categoryRows.join('\n')}
</table>
<h2>Reward by harness family</h2>
<p class="meta">Variant episodes count under every family their variant applied.</p>
${summaryTable(Object.entries(stats.byFamily), components)}
<h2>pass@k per group</h2>
<p class="meta">Unbiased estimator 1 − C(n−c, k)/C(n, k) per group (n scored episodes, c with reward ≥ ${escapeHtml(String(settings.passThreshold))}), averaged over groups with n ≥ k.</p>
${passTable(stats.passAtK)}
</body></html>
`;
}
