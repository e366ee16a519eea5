import type { HandoffOutcome, RunManifest, StageOutcome } from './run-manifest';
import { escapeHtml } from '../../shared/report/html';

/**
 * The run in the method's order for the run report: the stages that start with the run, then
 * each trainer handoff (what it waited for, the checkpoint and policy version it got, whether
 * the training was simulated) followed by the stages that ran on its checkpoint; and a timeline
 * chart of stages and handoff waits on one time axis.
 */

type OrderInput = Pick<RunManifest, 'stages' | 'handoffs'>;

/** Groups in run order: the first group has no handoff; each next one follows a handoff. */
export function runOrderGroups(report: OrderInput): Array<{ handoff?: HandoffOutcome; stages: StageOutcome[] }> {
  const handoffs = report.handoffs ?? [];
  return [
    { stages: report.stages.filter((stage) => stage.handoff === undefined) },
    ...handoffs.map((handoff) => ({
      handoff,
      stages: report.stages.filter((stage) => stage.handoff === handoff.name),
    })),
  ];
}

function stageLabel(stage: StageOutcome): string {
  const kind = stage.kind ? ` (${stage.kind})` : '';
  const version = stage.policyVersion !== undefined ? `, policy v${stage.policyVersion}` : '';
  return `${stage.name}${kind}${version}: ${stage.status}`;
}

function checkpointLabel(handoff: HandoffOutcome): string {
  const checkpoint = handoff.checkpoint;
  if (!checkpoint)
    return handoff.status === 'completed' ? 'checkpoint registered' : `no checkpoint (${handoff.status})`;
  const where = checkpoint.endpoint
    ? `${checkpoint.model ?? ''} at ${checkpoint.endpoint}`
    : (checkpoint.modelDir ?? '');
  const version = checkpoint.policyVersion ?? handoff.policyVersion;
  return `${checkpoint.simulated ? 'SIMULATED TRAINING (no training happened): ' : ''}checkpoint ${where}${version !== undefined ? `, policy v${version}` : ''}${checkpoint.registeredBy ? `, registered by ${checkpoint.registeredBy}` : ''}`;
}

/** What a real trainer did for the handoff: objective, steps, loss, the token-in-token-out and ONNX proofs. */
function trainingLabel(handoff: HandoffOutcome): string {
  const training = handoff.checkpoint?.training;
  if (!training) return '';
  const parts = [
    `trained: ${training.objective}, ${training.steps} steps`,
    training.finalLoss !== null ? `final loss ${training.finalLoss.toFixed(4)}` : undefined,
    training.tokensPerSecond !== undefined ? `${training.tokensPerSecond.toFixed(0)} tokens/s` : undefined,
    training.titoMaxAbsDiff !== undefined
      ? `token-in-token-out max |log-prob diff| ${training.titoMaxAbsDiff.toExponential(2)}`
      : undefined,
    training.reverseKlBefore !== undefined && training.reverseKlAfter !== undefined
      ? `reverse KL ${training.reverseKlBefore.toFixed(4)} -> ${training.reverseKlAfter.toFixed(4)}`
      : undefined,
    training.advantages
      ? `${training.advantages.nonZero} of ${training.advantages.records} records with a non-zero advantage`
      : undefined,
    training.onnxMaxAbsLogitDiff !== undefined
      ? `ONNX vs PyTorch max |logit diff| ${training.onnxMaxAbsLogitDiff.toExponential(2)}`
      : undefined,
  ];
  return `; ${parts.filter((part) => part !== undefined).join(', ')}`;
}

/** A handoff's loss curve as a small line chart (none without a curve of two points or more). */
export function lossCurveSvg(handoff: HandoffOutcome): string {
  const curve = handoff.checkpoint?.training?.lossCurve ?? [];
  if (curve.length < 2) return '';
  const width = 360;
  const height = 120;
  const pad = { left: 48, right: 8, top: 8, bottom: 22 };
  const steps = curve.map((point) => point.step);
  const losses = curve.map((point) => point.loss);
  const [minStep, maxStep] = [Math.min(...steps), Math.max(...steps)];
  const [minLoss, maxLoss] = [Math.min(...losses), Math.max(...losses)];
  const x = (step: number) =>
    pad.left + ((step - minStep) / Math.max(1e-9, maxStep - minStep)) * (width - pad.left - pad.right);
  const y = (loss: number) =>
    pad.top + (1 - (loss - minLoss) / Math.max(1e-9, maxLoss - minLoss)) * (height - pad.top - pad.bottom);
  const points = curve.map((point) => `${x(point.step).toFixed(1)},${y(point.loss).toFixed(1)}`).join(' ');
  return (
    `<svg class="loss" width="${width}" height="${height}" role="img" aria-label="loss curve of handoff ${escapeHtml(handoff.name)}">` +
    `<polyline fill="none" stroke="#1f6feb" stroke-width="1.5" points="${points}"/>` +
    `<line x1="${pad.left}" y1="${height - pad.bottom}" x2="${width - pad.right}" y2="${height - pad.bottom}" stroke="#888"/>` +
    `<text x="2" y="${pad.top + 8}" font-size="10">${maxLoss.toFixed(3)}</text>` +
    `<text x="2" y="${height - pad.bottom}" font-size="10">${minLoss.toFixed(3)}</text>` +
    `<text x="${pad.left}" y="${height - 6}" font-size="10">step ${minStep}</text>` +
    `<text x="${width - pad.right - 60}" y="${height - 6}" font-size="10">step ${maxStep}</text>` +
    `</svg>`
  );
}

/** Rounds with maxStaleness: what the handoff left out of its request as too old. */
function droppedLabel(handoff: HandoffOutcome): string {
  if (handoff.dropped === undefined) return '';
  if (handoff.dropped.length === 0) return '; stale records dropped: 0';
  return `; stale records dropped: ${handoff.dropped.reduce((sum, entry) => sum + entry.records, 0)} (${handoff.dropped.map((entry) => `${entry.stage} ${entry.reason}`).join('; ')})`;
}

/** The ordered list (empty for a run without handoffs: the stage table says it all). */
export function runOrderHtml(report: OrderInput): string {
  if ((report.handoffs ?? []).length === 0) return '';
  const items = runOrderGroups(report).flatMap((group) => [
    ...(group.handoff
      ? [
          `<li class="handoff"><b>handoff ${escapeHtml(group.handoff.name)}</b> after ${escapeHtml(group.handoff.after.join(', '))}: ${escapeHtml(group.handoff.status)}; ` +
            `${escapeHtml(checkpointLabel(group.handoff))}${escapeHtml(trainingLabel(group.handoff))}${escapeHtml(droppedLabel(group.handoff))}${group.handoff.requestUri ? ` <span class="detail">request <code>${escapeHtml(group.handoff.requestUri)}</code></span>` : ''}` +
            `${group.handoff.error ? `<div class="error">${escapeHtml(group.handoff.error)}</div>` : ''}${lossCurveSvg(group.handoff)}</li>`,
        ]
      : []),
    ...group.stages.map((stage) => `<li>${escapeHtml(stageLabel(stage))}</li>`),
  ]);
  const simulated = (report.handoffs ?? []).some((handoff) => handoff.checkpoint?.simulated);
  return (
    `<h2>Order of the run</h2>\n${simulated ? '<p class="error"><b>Simulated training:</b> the checkpoints below are re-seeded dummy models registered by the demo\'s simulated trainer; no model was trained.</p>\n' : ''}` +
    `<ol class="order">\n${items.join('\n')}\n</ol>\n${timelineSvg(report)}`
  );
}

/** Stages and handoff waits as bars on one time axis (start to finish). */
function timelineSvg(report: OrderInput): string {
  const rows: Array<{ label: string; start: number; end: number; color: string }> = [];
  for (const group of runOrderGroups(report)) {
    const handoff = group.handoff;
    if (handoff?.requestedAt) {
      const start = Date.parse(handoff.requestedAt);
      rows.push({
        label: `handoff ${handoff.name} (waiting for the trainer)`,
        start,
        end: handoff.checkpointAt ? Date.parse(handoff.checkpointAt) : start,
        color: '#b26a00',
      });
    }
    for (const stage of group.stages) {
      if (!stage.startedAt || !stage.finishedAt) continue;
      rows.push({
        label: `${stage.name}${stage.policyVersion !== undefined ? ` (v${stage.policyVersion})` : ''}`,
        start: Date.parse(stage.startedAt),
        end: Date.parse(stage.finishedAt),
        color: stage.status === 'completed' ? '#2e7d32' : stage.status === 'held' ? '#b26a00' : '#c62828',
      });
    }
  }
  if (rows.length === 0) return '';
  const first = Math.min(...rows.map((row) => row.start));
  const span = Math.max(1, Math.max(...rows.map((row) => row.end)) - first);
  const rowHeight = 22;
  const labelWidth = 280;
  const width = 480;
  const bars = rows.map((row, index) => {
    const y = index * rowHeight;
    const x = labelWidth + Math.round(((row.start - first) / span) * width);
    const barWidth = Math.max(2, Math.round(((row.end - row.start) / span) * width));
    return `<text x="0" y="${y + 15}" font-size="12">${escapeHtml(row.label)}</text><rect x="${x}" y="${y + 4}" width="${barWidth}" height="14" fill="${row.color}"/>`;
  });
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${labelWidth + width + 20}" height="${rows.length * rowHeight}" role="img" aria-label="run timeline">${bars.join('')}</svg>`;
}
