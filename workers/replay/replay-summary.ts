import type { StageFigure, StageSummary } from '../../queues/stage-kit/stage-summary';
import type { ReplayOutput } from './replay-contract';

const verdictTone = { pass: 'pass', fail: 'fail', 'no-data': 'warn' } as const;

/** Run-report figures of replay: the latency SLO verdict and each objective's observed value. */
export function summarizeReplay(output: ReplayOutput): StageSummary {
  const objectives = output.objectives.map((objective): StageFigure => ({
    label: `P${objective.percentile} ${objective.metric}`,
    value: objective.observed ?? 'no data',
    ...(objective.observed !== null ? { unit: 'ms' as const } : {}),
    tone: objective.pass === null ? 'warn' : objective.pass ? 'pass' : 'fail',
    detail: `objective ≤ ${objective.maxMs} ms`,
  }));
  const turns = output.viewerTurns;
  const ms = (value: number | null | undefined): StageFigure['value'] =>
    value === null || value === undefined ? 'no data' : Math.round(value);
  const turnFigures: StageFigure[] = turns
    ? [
        {
          label: 'viewer turn: first answer text P50 / P95',
          value: `${ms(turns.firstTokenP50Ms)} / ${ms(turns.firstTokenP95Ms)} ms`,
          detail: `${turns.turns} turns, from the viewer's message`,
        },
        {
          label: 'viewer turn: whole answer P50 / P95',
          value: `${ms(turns.responseP50Ms)} / ${ms(turns.responseP95Ms)} ms`,
          detail: "from the viewer's message",
        },
        {
          label: 'per turn: calls, tool ms, model ms (mean)',
          value: `${turns.callsPerTurnMean?.toFixed(2) ?? '–'}, ${ms(turns.toolMsPerTurnMean)}, ${ms(turns.modelMsPerTurnMean)}`,
        },
      ]
    : [];
  return {
    figures: [
      {
        label: 'latency SLO',
        value: output.verdict,
        tone: verdictTone[output.verdict],
        detail: `target ${output.target}`,
      },
      ...objectives,
      ...turnFigures,
      ...(output.serving ? [{ label: 'serving', value: output.serving }] : []),
      ...(output.sweep
        ? [{ label: 'sweep capacity', value: output.sweep.capacity ?? 'none', detail: output.sweep.stoppedBecause }]
        : []),
      {
        label: 'sessions',
        value: output.sessions,
        ...(output.unreplayable > 0 ? { detail: `${output.unreplayable} unreplayable` } : {}),
      },
      {
        label: 'failed calls',
        value: output.callsFailed,
        ...(output.callsFailed > 0 ? { tone: 'warn' as const } : {}),
        detail: `of ${output.calls} calls`,
      },
    ],
    links: [
      { label: 'replay report', uri: output.htmlUri },
      { label: 'report JSON', uri: output.reportUri },
      { label: 'requests CSV', uri: output.requestsCsvUri },
    ],
  };
}
