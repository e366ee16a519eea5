import { buildRunReport, renderRunReportHtml } from './run-report';
import type { StageOutcome } from './run-manifest';

const stages: StageOutcome[] = [
  { name: 'collect', status: 'completed', jobId: 'r.collect.1', parts: 4, objects: 4, records: 40, durationMs: 2_000, dependsOn: [], manifestUri: 's3://b/runs/r/collect/manifest.json' },
  { name: 'augment', status: 'failed', jobId: 'r.augment.1', parts: 2, durationMs: 500, dependsOn: ['collect'], error: '[BAD] <script>alert(1)</script>' },
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
    expect(buildRunReport(manifest).totals).toEqual({ stages: 2, completed: 1, failed: 1, parts: 6, objects: 4, records: 40 });
  });

  it('renders a self-contained page with a row and a duration bar per stage, escaping what it shows', () => {
    const html = renderRunReportHtml(buildRunReport(manifest), { manifestUri: 's3://b/runs/r/run-manifest.json' });
    expect(html).not.toMatch(/<script|<link|src=/);
    expect(html).toContain('&#60;script&#62;alert(1)&#60;/script&#62;');
    expect(html.match(/<tr><td>/g)).toHaveLength(2);
    expect(html.match(/<rect /g)).toHaveLength(2);
    // The longest stage gets the full bar width.
    expect(html).toContain('<rect x="160" y="4" width="420"');
    expect(html).toContain('1/2 stages completed, 6 parts, 4 objects, 40 records');
  });
});
