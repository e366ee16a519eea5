import { summarizeReplay } from './replay-summary';

describe('replay run-report figures', () => {
  it('show the SLO, what a viewer waits per turn, what a turn is made of, and the serving setup', () => {
    const summary = summarizeReplay({
      manifestUri: 'file:///r/manifest.json',
      reportUri: 'file:///r/report.json',
      htmlUri: 'file:///r/report.html',
      requestsCsvUri: 'file:///r/requests.csv',
      verdict: 'pass',
      objectives: [
        { metric: 'turn_response_from_intended_ms', percentile: 50, maxMs: 3407, observed: 2100.4, pass: true },
      ],
      sessions: 12,
      calls: 30,
      callsFailed: 0,
      unreplayable: 0,
      target: 'openai qwen3 @ http://vllm:8000',
      viewerTurns: {
        turns: 13,
        firstTokenP50Ms: 812.6,
        firstTokenP95Ms: 1900.2,
        responseP50Ms: 2100.4,
        responseP95Ms: 5000,
        callsPerTurnMean: 2.46,
        toolMsPerTurnMean: 465.2,
        modelMsPerTurnMean: 1800,
      },
      serving: 'hardware: 1× NVIDIA H20 96 GB; engine: vllm 0.11.0; serving: speculative=mtp',
    });
    const byLabel = Object.fromEntries(summary.figures.map((figure) => [figure.label, figure]));
    expect(byLabel['P50 turn_response_from_intended_ms']).toMatchObject({ value: 2100.4, unit: 'ms', tone: 'pass' });
    expect(byLabel['viewer turn: first answer text P50 / P95']).toMatchObject({
      value: '813 / 1900 ms',
      detail: "13 turns, from the viewer's message",
    });
    expect(byLabel['viewer turn: whole answer P50 / P95']?.value).toBe('2100 / 5000 ms');
    expect(byLabel['per turn: calls, tool ms, model ms (mean)']?.value).toBe('2.46, 465, 1800');
    expect(byLabel.serving?.value).toBe('hardware: 1× NVIDIA H20 96 GB; engine: vllm 0.11.0; serving: speculative=mtp');
  });
});
