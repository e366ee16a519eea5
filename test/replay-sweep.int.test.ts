import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { FileArtifactStore } from '../shared/artifacts/file-artifact-store';
import { writeJsonl } from '../shared/artifacts/jsonl-writer';
import { completionTokensOf, type ScriptedChatResponse } from '../shared/models/testing/chat-chunk-script';
import { OpenAiTestServer, type RecordedRequest } from '../shared/models/testing/openai-test-server';
import { compareReports, readReplayReport } from '../workers/replay/compare-reports';
import type { SweepReport } from '../workers/replay/replay-sweep';
import { syntheticSessions } from '../workers/replay/testing/synthetic-sessions';
import { runHatInProcess } from './support/hat-in-process';

/**
 * `hat replay sweep` against a local server whose latency grows with load in a known way: every
 * answer's TTFT is 30 ms per request in flight when it arrives (itself included). A session is
 * one viewer turn of two calls (tool step, answer) 5 ms apart, so at c concurrent sessions a
 * turn takes about 2 x 30c ms + a few: ~80, 140, 260, 500, 980 ms at c = 1, 2, 4, 8, 16. Under an
 * SLO of P50 <= 400 ms the capacity is 4, and the sweep stops at 8.
 */

let scratch: string;
let server: OpenAiTestServer | undefined;

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'hat-replay-sweep-'));
});

afterAll(async () => {
  await server?.close();
  await rm(scratch, { recursive: true, force: true });
});

it('finds the known capacity step, stops at the first step that breaks the SLO, and leaves comparable step reports', async () => {
  const ends: number[] = [];
  const responder = (request: RecordedRequest): ScriptedChatResponse => {
    const now = Date.now();
    const running = ends.filter((end) => end > now);
    ends.length = 0;
    ends.push(...running);
    const last = (request.body?.messages ?? []).at(-1) as { role?: string } | undefined;
    const script: ScriptedChatResponse =
      last?.role === 'user'
        ? { toolCalls: [{ name: 'get_item_detail', arguments: { item_id: 'item-1' } }] }
        : { content: 'In stock today.' };
    const timing = { ttftMs: 30 * (running.length + 1), tokenDelayMs: 1 };
    ends.push(now + timing.ttftMs + (completionTokensOf(script) + 1) * timing.tokenDelayMs);
    return { ...script, timing };
  };
  server = await OpenAiTestServer.start({ responder });
  const store = new FileArtifactStore(scratch);
  const sessions = await writeJsonl(store, 'sessions.jsonl.gz', syntheticSessions({ count: 24, toolMs: 5 }));
  const config = join(scratch, 'sweep.yaml');
  await writeFile(
    config,
    [
      'target:',
      '  adapter: openai',
      `  baseUrl: ${server.baseUrl}`,
      '  model: test-model',
      '  concurrency: 64',
      '  maxRetries: 0',
      '  hardware: local test server',
      'load: { kind: closed, concurrency: 1 }',
      'warmupSessions: 2',
      'toolLatency: { apply: none }',
      'slo:',
      '  objectives: [{ metric: turn_response_from_intended_ms, percentile: 50, maxMs: 400 }]',
      '  goodput: { turn_response_from_intended_ms: 400 }',
      'sweep: { ladder: [1, 2, 4, 8, 16], sessionsPerStep: 24 }',
      '',
    ].join('\n'),
  );
  const out = join(scratch, 'out');
  const result = await runHatInProcess(
    { HAT_LOG_LEVEL: 'silent' },
    'replay',
    'sweep',
    '--config',
    config,
    '--in',
    sessions.uri,
    '--out',
    pathToFileURL(out).href,
    '--json',
  );
  expect(result.stderr).not.toMatch(/hat:/);
  expect(result.code).toBe(0);
  const sweep = JSON.parse(result.stdout) as SweepReport;
  expect(sweep.steps.map((step) => [step.load, step.verdict])).toEqual([
    [1, 'pass'],
    [2, 'pass'],
    [4, 'pass'],
    [8, 'fail'],
  ]);
  expect(sweep.capacity).toMatchObject({ load: 4 });
  expect(sweep.capacity?.turnGoodputPerSecond).toBeGreaterThan(0);
  expect(sweep.stoppedBecause).toMatch(/step 3 \(load 8\) broke the SLO; the steps above it were not run/);
  // Latency grows with load as the server was told to make it.
  const p50s = sweep.steps.map((step) => step.latency.turn_response_from_intended_ms?.p50 as number);
  for (let index = 1; index < p50s.length; index++) expect(p50s[index]).toBeGreaterThan(p50s[index - 1]);
  expect(p50s[2]).toBeGreaterThan(200);
  expect(p50s[2]).toBeLessThan(400);
  expect(existsSync(join(out, 'step-04'))).toBe(false);

  const html = await readFile(join(out, 'sweep.html'), 'utf8');
  expect(html).toMatch(/Highest load holding the SLO: <b>4 concurrent sessions<\/b>/);
  expect(html).toContain('aria-label="latency vs load"');
  const manifest = JSON.parse(await readFile(join(out, 'manifest.json'), 'utf8'));
  expect(manifest.objects.map((object: { key: string }) => object.key).sort()).toEqual(['sweep.html', 'sweep.json']);

  // Each step is an ordinary replay report: the step at 8 against the step at 1 shows the growth beyond noise.
  const low = await readReplayReport(join(out, 'step-00', 'report.json'));
  const high = await readReplayReport(join(out, 'step-03', 'report.json'));
  expect(low.target.hardware).toBe('local test server');
  const comparison = compareReports(
    low,
    high,
    { a: 'step-00', b: 'step-03' },
    { metrics: ['turn_response_from_intended_ms', 'ttft_ms'], resamples: 200 },
  );
  expect(comparison.significantMetrics).toEqual(['turn_response_from_intended_ms', 'ttft_ms']);
  expect(comparison.warnings).toEqual([]);
});
