import { formatPercent } from '../../shared/metrics/format-percent';
import { diffHarnesses, formatHarnessDiff } from '../../shared/harness/harness-diff';
import type { Harness } from '../../shared/harness/harness-types';
import { augmentChecks } from '../../shared/harness/hsa/augment-trajectory';
import { hsaFamilies, type Variant } from '../../shared/harness/hsa/variant-mapping';
import type { ChatMessage } from '../../shared/trajectory/messages';
import type { AugmentSample } from './augment-part';
import { droppedTotal, stageDropReasons, type AugmentStats, type PairCounts } from './augment-stats';

/**
 * The augment stage's HTML report: one self-contained page (inline CSS, no scripts, nothing
 * fetched) with the counts per family and per check, the variants made, and sample
 * trajectories before and after side by side with the semantic diff of their harnesses.
 */

export interface AugmentReportInput {
  runId: string;
  canonical: Harness;
  canonicalHash: string;
  seed: string;
  replayCheck: boolean;
  variantsPerTrajectory: number;
  stats: AugmentStats;
  variants: Variant[];
  /** Pool draws rejected before any trajectory saw them, by reason. */
  rejectedVariants: Record<string, number>;
  samples: AugmentSample[];
}

function escape(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function percent(part: number, whole: number): string {
  return whole === 0 ? '–' : formatPercent(part / whole);
}

function countsRow(label: string, counts: PairCounts): string {
  const reasons = stageDropReasons.map((reason) => `<td>${counts.dropped[reason] ?? 0}</td>`).join('');
  return `<tr><th>${escape(label)}</th><td>${counts.generated}</td><td>${counts.kept}</td><td>${percent(counts.kept, counts.generated)}</td><td>${droppedTotal(counts)}</td>${reasons}</tr>`;
}

function messageHtml(message: ChatMessage): string {
  const parts: string[] = [];
  if (message.content !== null && message.content !== '') parts.push(`<pre>${escape(message.content)}</pre>`);
  if (message.role === 'assistant') {
    for (const call of message.tool_calls ?? [])
      parts.push(`<pre class="call">${escape(call.function.name)}(${escape(call.function.arguments)})</pre>`);
  }
  const label = message.role === 'tool' ? `tool · ${escape(message.tool_call_id)}` : message.role;
  return `<div class="message ${message.role}"><div class="role">${label}</div>${parts.join('')}</div>`;
}

function sampleHtml(sample: AugmentSample, canonical: Harness, variant: Variant | undefined, index: number): string {
  const diff = variant ? formatHarnessDiff(diffHarnesses(canonical, variant.harness)) : '(variant not found)';
  const families = sample.augmented.harness.families?.join(', ') ?? '';
  const column = (title: string, trajectory: typeof sample.source) =>
    `<div class="column"><h4>${escape(title)}</h4><p class="meta">${escape(trajectory.id)} · reward ${trajectory.reward.total} · ${trajectory.tools.length} tools</p>${trajectory.messages.map(messageHtml).join('')}</div>`;
  return `<section class="sample">
<h3>Sample ${index + 1}: task ${escape(sample.source.taskId)} (${escape(sample.source.category)})</h3>
<p class="meta">variant ${escape(sample.variantHash.slice(0, 16))} · families: ${escape(families)}</p>
<details><summary>Harness diff (canonical → variant)</summary><pre>${escape(diff)}</pre></details>
<div class="columns">${column('Before (canonical harness)', sample.source)}${column('After (variant)', sample.augmented)}</div>
</section>`;
}

export function augmentReportHtml(input: AugmentReportInput): string {
  const { stats } = input;
  const reasonHeaders = stageDropReasons.map((reason) => `<th>${escape(reason)}</th>`).join('');
  const familyRows = hsaFamilies.map((family) => countsRow(family, stats.families[family])).join('\n');
  const checkRows = augmentChecks
    .map(
      (check) =>
        `<tr><th>${check}</th><td>${stats.checks[check].checked}</td><td>${stats.checks[check].failed}</td><td>${percent(stats.checks[check].failed, stats.checks[check].checked)}</td></tr>`,
    )
    .join('\n');
  const byHash = new Map(input.variants.map((variant) => [variant.hash, variant]));
  const variantRows = input.variants
    .map(
      (variant) =>
        `<tr><td><code>${escape(variant.hash.slice(0, 16))}</code></td><td>${escape(variant.mapping.families.join(', '))}</td><td>${variant.mapping.renames.length}</td><td>${variant.mapping.addedTools.length}</td><td>${variant.mapping.addedSkills.length}</td><td>${escape(variant.harness.prompt.format)}</td></tr>`,
    )
    .join('\n');
  const rejected = Object.entries(input.rejectedVariants)
    .map(([reason, count]) => `${escape(reason)}: ${count}`)
    .join(', ');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>HSA augmentation report · ${escape(input.runId)}</title>
<style>
body{font-family:system-ui,-apple-system,"PingFang SC","Noto Sans CJK SC",sans-serif;margin:24px;color:#1b1b1b;max-width:1600px}
table{border-collapse:collapse;margin:8px 0 24px}th,td{border:1px solid #ccc;padding:4px 8px;text-align:right;font-size:13px}th{background:#f4f4f4}tr th:first-child{text-align:left}
.columns{display:grid;grid-template-columns:1fr 1fr;gap:16px}.column{min-width:0}
.message{border:1px solid #ddd;border-radius:6px;margin:6px 0;padding:6px}.message .role{font-size:11px;font-weight:600;text-transform:uppercase;color:#666}
.message.system{background:#f7f7fb}.message.user{background:#eef6ff}.message.assistant{background:#f1fbf1}.message.tool{background:#fff8ec}
pre{white-space:pre-wrap;word-break:break-word;margin:4px 0;font-size:12px}pre.call{color:#7a3e00}.meta{color:#666;font-size:12px}
section.sample{border-top:2px solid #333;margin-top:32px;padding-top:8px}
</style></head><body>
<h1>HSA augmentation report</h1>
<p class="meta">run ${escape(input.runId)} · canonical harness ${escape(input.canonical.id)} ${escape(input.canonical.version)} (${escape(input.canonicalHash.slice(0, 12))}) · seed ${escape(input.seed)} · ${input.variantsPerTrajectory} variants per trajectory · replay check ${input.replayCheck ? 'on' : 'off'}</p>
<h2>Trajectories</h2>
<table><tr><th>read</th><th>unparseable</th><th>missing task</th><th>relabel entries</th></tr><tr><td>${stats.trajectories.read}</td><td>${stats.trajectories.unparseable}</td><td>${stats.trajectories.missingTask}</td><td>${stats.relabel}</td></tr></table>
<h2>Pairs (trajectory × variant)</h2>
<table><tr><th></th><th>generated</th><th>kept</th><th>kept %</th><th>dropped</th>${reasonHeaders}</tr>
${countsRow('all', stats.pairs)}
${familyRows}
</table>
<h2>Checks</h2>
<table><tr><th>check</th><th>checked</th><th>failed</th><th>failed %</th></tr>
${checkRows}
</table>
<h2>Variants (${input.variants.length})</h2>
${rejected === '' ? '' : `<p class="meta">draws rejected and redrawn: ${rejected}</p>`}
<table><tr><th>hash</th><th>families</th><th>renames</th><th>+tools</th><th>+skills</th><th>format</th></tr>
${variantRows}
</table>
<h2>Samples</h2>
${input.samples.length === 0 ? '<p>No trajectory was kept.</p>' : input.samples.map((sample, index) => sampleHtml(sample, input.canonical, byHash.get(sample.variantHash), index)).join('\n')}
</body></html>
`;
}
