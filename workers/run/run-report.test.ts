import { buildRunReport, renderRunReportHtml } from './run-report';
import type { StageOutcome } from './run-manifest';

const stages: StageOutcome[] = [
  {
    name: 'collect',
    status: 'completed',
    jobId: 'r.collect.1',
    parts: 4,
    objects: 4,
    records: 40,
    durationMs: 2_000,
    dependsOn: [],
    manifestUri: 's3://b/runs/r/collect/manifest.json',
  },
  {
    name: 'augment',
    status: 'failed',
    jobId: 'r.augment.1',
    parts: 2,
    durationMs: 500,
    dependsOn: ['collect'],
    error: '[BAD] <script>alert(1)</script>',
  },
];
const manifest = {
  schemaVersion: 1 as const,
  runId: 'r',
  status: 'failed' as const,
  configHash: 'abc',
  seed: '0',
  artifactsRoot: 's3://b',
  source: 'cli',
  codeVersion: '0.1.0',
  createdAt: '2025-01-01T00:00:00.000Z',
  finishedAt: '2025-01-01T00:00:03.000Z',
  durationMs: 3_000,
  stages,
};

describe('run report', () => {
  it('totals parts, objects and records over the stages', () => {
    expect(buildRunReport(manifest).totals).toEqual({
      stages: 2,
      completed: 1,
      held: 0,
      failed: 1,
      parts: 6,
      objects: 4,
      records: 40,
    });
  });

  it('renders a self-contained page with a row and a duration bar per stage, escaping what it shows', () => {
    const html = renderRunReportHtml(buildRunReport(manifest), { manifestUri: 's3://b/runs/r/run-manifest.json' });
    expect(html).not.toMatch(/<script|<link|src=/);
    expect(html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(html.match(/<tr><td>/g)).toHaveLength(2);
    expect(html.match(/<rect /g)).toHaveLength(2);
    // The longest stage gets the full bar width.
    expect(html).toContain('<rect x="160" y="4" width="420"');
    expect(html).toContain('1/2 stages completed, 6 parts, 4 objects, 40 records');
    expect(html).not.toContain('Key figures');
  });

  it("shows each stage's key figures by unit and tone, its report links, and a bar per rate", () => {
    const withFigures: StageOutcome[] = [
      {
        ...stages[0],
        figures: [
          { label: 'acceptance rate', value: 0.875, unit: 'ratio', detail: 'tasks with an accepted trajectory' },
          { label: 'tasks to review', value: 1234, tone: 'warn' },
        ],
        links: [{ label: 'collect report', uri: 's3://b/runs/r/collect/report.html' }],
      },
      {
        name: 'replay',
        status: 'completed',
        jobId: 'r.replay.1',
        parts: 1,
        dependsOn: [],
        figures: [
          { label: 'latency SLO', value: 'fail', tone: 'fail' },
          { label: 'P99 ttft_ms', value: 812.25, unit: 'ms', tone: 'fail' },
        ],
      },
    ];
    const html = renderRunReportHtml(buildRunReport({ ...manifest, stages: withFigures }), {
      manifestUri: 's3://b/runs/r/run-manifest.json',
      runRootUri: 's3://b/runs/r',
    });
    const keyFigures = html.slice(html.indexOf('<h2>Key figures</h2>'));
    expect(keyFigures).toContain(
      '<td>acceptance rate</td><td class="n">87.5%</td><td class="detail">tasks with an accepted trajectory</td>',
    );
    expect(keyFigures).toContain('<td class="n" style="color:#b26a00;font-weight:600">1,234</td>');
    expect(keyFigures).toContain('<td class="n" style="color:#c62828;font-weight:600">fail</td>');
    expect(keyFigures).toContain('812.3 ms');
    // Linked relative to the run's folder, where the run report lies, so a browser can open it.
    expect(keyFigures).toContain(
      '<a href="collect/report.html">collect report</a>: <code>s3://b/runs/r/collect/report.html</code>',
    );
    // One rate bar: 87.5% of the 360-pixel scale.
    expect(html).toContain('<h2>Rates</h2>');
    expect(html).toContain('width="315" height="16" fill="#1565c0"');
  });
});
