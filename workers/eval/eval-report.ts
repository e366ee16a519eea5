import { experimentHtml } from './eval-experiment';
import type { EvalScores } from './eval-scores';
import { escapeHtml } from '../../shared/report/html';
import { fixed, intervalTable } from './report-cells';
import { findEvalSuite } from './suites/registry';

/**
 * The eval stage's HTML report: one self-contained page (inline CSS and SVG, no scripts) with
 * the leaderboard (models × suites, each score with its bootstrap 95% interval drawn as a bar
 * and whisker), breakdowns per task category and per HSA family, the four IFEval figures, the
 * judge's scores apart from rule scores, paired comparisons and the contamination check.
 */

/** A suite's column and section heading: its title (a suite no longer registered: its name). */
const suiteTitle = (suite: string): string => findEvalSuite(suite)?.title ?? suite;

export function evalReportHtml(scores: EvalScores): string {
  const labels = scores.models.map((model) => model.label);
  const suites = Object.keys(scores.suites);
  const modelName = (label: string) => {
    const model = scores.models.find((entry) => entry.label === label);
    return model?.simulated ? `${label} (dummy weights)` : label;
  };
  const simulated = scores.models.filter((model) => model.simulated);
  const sections: string[] = [];
  if (scores.experiment) sections.push(experimentHtml(scores.experiment));
  sections.push(
    `<h2>Leaderboard</h2><p class="meta">Scores 0–100; brackets and whiskers: bootstrap 95% intervals over items (${escapeHtml(scores.seed)}).</p>` +
      intervalTable(
        suites.map((suite) => suiteTitle(suite)),
        labels.map((label) => [modelName(label), suites.map((suite) => scores.leaderboard[label]?.[suite])]),
      ) +
      `<p class="meta">Error rate (items whose request failed or timed out; each scores 0 on every check it carries): ${labels
        .map((label) => `${escapeHtml(label)} ${fixed((scores.scores[label]?.errorRate ?? 0) * 100)}%`)
        .join(' · ')}</p>`,
  );
  if (simulated.length > 0) {
    sections.push(
      `<p class="warning">${simulated.map((model) => `${escapeHtml(model.label)}${model.simulatedReason ? ` (${escapeHtml(model.simulatedReason)})` : ''}`).join(', ')}: random-weight or simulated models. Their numbers show the pipeline works, not model quality.</p>`,
    );
  }
  const failing = labels.filter((label) => (scores.scores[label]?.modelErrors ?? 0) > 0);
  if (failing.length > 0)
    sections.push(
      `<p class="warning">${failing
        .map((label) => {
          const entry = scores.scores[label];
          return `${escapeHtml(label)}: ${entry.modelErrors} of ${entry.evaluated ?? 0} items failed (error rate ${fixed((entry.errorRate ?? 0) * 100)}%)`;
        })
        .join(
          '; ',
        )}. A failed or timed-out item scores 0 on every check it carries; see <a href="#failed-items">Failed items</a>.</p>`,
    );
  if (scores.comparisons.length > 0) {
    sections.push(
      `<h2>Paired comparisons</h2><p class="meta">Mean difference a − b on the items both answered, paired-bootstrap 95% interval; an interval that excludes 0 is a difference the items support.</p><table><tr><th>a − b</th><th>suite</th><th>items</th><th>difference</th><th>95% interval</th></tr>${scores.comparisons
        .map((comparison) => {
          const { difference } = comparison;
          const clear = difference.low > 0 || difference.high < 0;
          return `<tr><th>${escapeHtml(comparison.a)} − ${escapeHtml(comparison.b)}</th><td>${escapeHtml(suiteTitle(comparison.suite))}</td><td>${difference.items}</td><td class="${clear ? (difference.score > 0 ? 'up' : 'down') : ''}">${difference.score >= 0 ? '+' : ''}${fixed(difference.score, 2)}</td><td>[${fixed(difference.low, 2)}, ${fixed(difference.high, 2)}]</td></tr>`;
        })
        .join('')}</table>`,
    );
  }
  // Each suite's own section (breakdowns), in suite order.
  for (const suite of suites) {
    const definition = findEvalSuite(suite);
    if (!definition?.reportHtml) continue;
    sections.push(
      definition.reportHtml({
        scores,
        labels,
        modelName,
        breakdownOf: (label) => scores.scores[label]?.[suite],
      }),
    );
  }
  if (scores.judge) {
    const judged = scores.judge.suites.filter((suite) => suites.includes(suite));
    sections.push(
      `<h2>Judge scores (apart from rule scores)</h2><p class="meta">judge ${escapeHtml(scores.judge.model)} · rubric ${escapeHtml(scores.judge.rubricVersion)} (${escapeHtml(scores.judge.rubricHash.slice(0, 12))}) · pointwise rating 1–5 mapped to 0–100 · ${scores.judge.missing} verdicts missing</p>` +
        intervalTable(
          judged.map((suite) => suiteTitle(suite)),
          labels.map((label) => [
            modelName(label),
            judged.map((suite) => scores.scores[label]?.judge?.[suite]?.overall),
          ]),
        ) +
        (scores.judge.missing > 0
          ? `<p class="warning">${scores.judge.missing} items have no judge verdict (judge unavailable or unparsable); their rule scores are unaffected.</p>`
          : ''),
    );
  }
  sections.push(contaminationSection(scores));
  if (scores.cache) sections.push(cacheSection(scores.cache));
  sections.push(
    `<h2>Models</h2><table><tr><th>label</th><th>provider</th><th>model</th><th>items</th><th>failed items</th><th>error rate</th></tr>${scores.models
      .map(
        (model) =>
          `<tr><th>${escapeHtml(modelName(model.label))}</th><td>${escapeHtml(model.provider)}</td><td>${escapeHtml(model.modelId)}</td><td>${scores.scores[model.label]?.evaluated ?? 0}</td><td>${scores.scores[model.label]?.modelErrors ?? 0}</td><td>${fixed((scores.scores[model.label]?.errorRate ?? 0) * 100)}%</td></tr>`,
      )
      .join('')}</table>`,
  );
  const failures = labels.flatMap((label) =>
    (scores.scores[label]?.failures ?? []).map((failure) => ({ label, ...failure })),
  );
  if (failures.length > 0)
    sections.push(
      `<h2 id="failed-items">Failed items</h2><p class="meta">Requests that failed or timed out; each scores 0 on every check it carries (it stays in every denominator).</p><table><tr><th>model</th><th>suite</th><th>item</th><th>status</th><th>error</th></tr>${failures
        .slice(0, 200)
        .map(
          (failure) =>
            `<tr><th>${escapeHtml(failure.label)}</th><td>${escapeHtml(failure.suite)}</td><td>${escapeHtml(failure.itemId)}</td><td>${escapeHtml(failure.status)}</td><td style="text-align:left">${escapeHtml(failure.error.slice(0, 300))}</td></tr>`,
        )
        .join(
          '',
        )}</table>${failures.length > 200 ? `<p class="meta">… ${failures.length - 200} more in scores.json</p>` : ''}`,
    );
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Evaluation · ${escapeHtml(scores.runId)}</title>
<style>
body{font-family:system-ui,-apple-system,"PingFang SC","Noto Sans CJK SC",sans-serif;margin:24px;color:#1b1b1b;max-width:1400px}
table{border-collapse:collapse;margin:8px 0 24px}th,td{border:1px solid #ccc;padding:4px 8px;text-align:right;font-size:13px;vertical-align:top}th{background:#f4f4f4}tr th:first-child{text-align:left}
.meta{color:#666;font-size:12px}.ci{color:#666;font-size:11px}.warning{background:#fff4d6;border:1px solid #e0b400;padding:8px;border-radius:4px}
.up{color:#16803c;font-weight:bold}.down{color:#b3261e;font-weight:bold}
</style></head><body>
<h1>Evaluation</h1>
<p class="meta">run ${escapeHtml(scores.runId)} · ${suites.map((suite) => `${escapeHtml(suite)}: ${scores.suites[suite]?.items ?? 0} items`).join(' · ')}</p>
${sections.join('\n')}
</body></html>
`;
}

/** What training saw: overlapping items with the training records that hold them, and held-out operators training used (a flagged figure). */
function contaminationSection(scores: EvalScores): string {
  const contamination = scores.contamination;
  const ngram = contamination.ngram;
  const how = ngram
    ? `items compared by task id and by ${ngram.n}-word n-grams of normalized text (a record holding ≥ ${Math.round(ngram.threshold * 100)}% of an item's n-grams)`
    : 'items compared by task id and normalized prompt text';
  const hitText = (overlap: EvalScores['contamination']['overlapping'][number]): string => {
    const hit = overlap.hits?.[0];
    if (!hit) return overlap.matchedBy;
    const more = (overlap.records ?? 1) > 1 ? ` and ${(overlap.records ?? 1) - 1} more record(s)` : '';
    return `${overlap.matchedBy}: record ${escapeHtml(hit.record)} of ${escapeHtml(hit.source)}, ${Math.round(hit.share * 100)}%${more}`;
  };
  const trained = contamination.heldOutTrained;
  return (
    `<h2>Contamination</h2><p class="meta">${contamination.manifests.length} training manifests, ${contamination.checked} objects read; ${how}.</p>` +
    (contamination.overlapping.length === 0
      ? '<p>No eval item appears in the training data given.</p>'
      : `<p class="warning">${contamination.overlapping.length} eval items appear in training data (allowOverlap: true):</p><ul>${contamination.overlapping
          .slice(0, 50)
          .map((overlap) => `<li>${escapeHtml(overlap.suite)}/${escapeHtml(overlap.itemId)} (${hitText(overlap)})</li>`)
          .join('')}</ul>${contamination.overlapping.length > 50 ? '<p>…</p>' : ''}`) +
    (trained
      ? `<p class="warning">HELD-OUT OPERATORS NOT HELD OUT (allowOverlap: true): the held_out_operators figure includes what training saw. ${[
          ...trained.families.map(
            (entry) =>
              `Stage ${escapeHtml(entry.stage)} applied ${escapeHtml(entry.family)} in ${entry.variants} variant(s).`,
          ),
          ...trained.variants.map(
            (entry) =>
              `Item ${escapeHtml(entry.itemId)} plays variant ${escapeHtml(entry.hash.slice(0, 12))}, trained on in ${escapeHtml(entry.stages.join(', '))}.`,
          ),
        ].join(' ')}</p>`
      : '')
  );
}

/** Model calls answered from the response cache and asked of the endpoints, per model. */
function cacheSection(cache: NonNullable<EvalScores['cache']>): string {
  const rows = Object.entries(cache.models);
  const hits = rows.reduce((sum, [, counts]) => sum + counts.hits, 0);
  const misses = rows.reduce((sum, [, counts]) => sum + counts.misses, 0);
  const rate = hits + misses === 0 ? 0 : (hits / (hits + misses)) * 100;
  return (
    `<h2>Response cache</h2><p class="meta">${hits} of ${hits + misses} model calls answered from ${escapeHtml(cache.prefix)} (hit rate ${rate.toFixed(1)}%); ${misses} requests sent. In-process models are not cached.</p>` +
    `<table><tr><th>model</th><th>cache hits</th><th>requests (misses)</th></tr>${rows
      .map(
        ([label, counts]) => `<tr><th>${escapeHtml(label)}</th><td>${counts.hits}</td><td>${counts.misses}</td></tr>`,
      )
      .join('')}</table>`
  );
}
