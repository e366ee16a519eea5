import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { FileArtifactStore } from '../shared/artifacts/file-artifact-store';
import { writeJsonl } from '../shared/artifacts/jsonl-writer';
import { OpenAiTestServer } from '../shared/models/testing/openai-test-server';
import type { ReportComparison } from '../workers/replay/compare-reports';
import { syntheticSessions } from '../workers/replay/testing/synthetic-sessions';
import { runHatInProcess } from './support/hat-in-process';

/** `hat stage replay` produces two reports (a fast and a slow server); `hat replay compare` A/Bs them. */

function hat(...argv: string[]) {
  return runHatInProcess({ HAT_LOG_LEVEL: 'silent' }, ...argv);
}

let scratch: string;
const servers: OpenAiTestServer[] = [];

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'hat-replay-compare-'));
});

afterAll(async () => {
  await Promise.all(servers.map((server) => server.close()));
  await rm(scratch, { recursive: true, force: true });
});

async function replayAgainst(
  name: string,
  ttftMs: { minMs: number; maxMs: number },
  sessionsUri: string,
  servingLines: string[] = [],
): Promise<string> {
  const server = await OpenAiTestServer.start({
    seed: name,
    timing: { ttftMs: { distribution: 'uniform', ...ttftMs }, tokenDelayMs: 1 },
  });
  servers.push(server);
  const config = join(scratch, `${name}.yaml`);
  await writeFile(
    config,
    [
      'target:',
      '  adapter: openai',
      `  baseUrl: ${server.baseUrl}`,
      '  model: test-model',
      '  concurrency: 16',
      '  maxRetries: 0',
      ...servingLines,
      'load: { kind: closed, concurrency: 8 }',
      'sessions: 40',
      'warmupSessions: 2',
      'percentiles: [50, 90]',
      // The recorded 5 ms tool times stand: the tool latency model's draws would swamp the sessions' TTFT difference.
      'toolLatency: { apply: none }',
      '',
    ].join('\n'),
  );
  const out = pathToFileURL(join(scratch, name)).href;
  const result = await hat('stage', 'replay', '--config', config, '--in', sessionsUri, '--out', out, '--json');
  expect(result.stderr).not.toMatch(/hat:/);
  expect(result.code).toBe(0);
  expect(JSON.parse(result.stdout)).toMatchObject({
    sessions: 40,
    calls: 80,
    callsFailed: 0,
    reportUri: `${out}/report.json`,
  });
  return join(scratch, name, 'report.json');
}

it('tells a real TTFT difference from run-to-run noise, seeded, in text and JSON', async () => {
  const store = new FileArtifactStore(scratch);
  const sessions = await writeJsonl(store, 'sessions.jsonl.gz', syntheticSessions({ count: 10, toolMs: 5 }));
  const fast = await replayAgainst('fast', { minMs: 20, maxMs: 40 }, sessions.uri, [
    '  hardware: 1x NVIDIA H20 96 GB',
    '  serving: { speculative: mtp, numSpeculativeTokens: 1 }',
  ]);
  // A gap far wider than a loaded machine's stalls: the fast server's P90 moves only if more than
  // a tenth of its calls stall by 200 ms, which the fast report's own lateness figures would show.
  const slow = await replayAgainst('slow', { minMs: 250, maxMs: 290 }, sessions.uri, [
    '  hardware: 1x NVIDIA H20 96 GB',
    '  serving: { speculative: none }',
  ]);

  const json = await hat('replay', 'compare', fast, slow, '--json', '--seed', '7', '--resamples', '400');
  expect(json.code).toBe(0);
  const comparison = JSON.parse(json.stdout) as ReportComparison;
  const ttft = comparison.metrics.find((metric) => metric.metric === 'ttft_ms');
  const lateness = (JSON.parse(await readFile(fast, 'utf8')) as { client: { possibleErrorTailMs: number } }).client;
  if (lateness.possibleErrorTailMs > 200)
    console.warn(
      `busy machine: the replay's loop ran ${lateness.possibleErrorTailMs.toFixed(0)} ms late (P99.9), so this run cannot judge the P90 difference`,
    );
  else expect(ttft?.percentiles[1]).toMatchObject({ percentile: 90, significant: true });
  expect(ttft?.percentiles[0]).toMatchObject({ percentile: 50, significant: true });
  expect(ttft?.percentiles[0]?.difference).toBeGreaterThan(150);
  expect(ttft?.percentiles[0]?.low).toBeGreaterThan(100);
  expect(comparison.significantMetrics).toContain('session_e2e_ms');
  expect(comparison.a.target).toMatch(/LOCAL TEST SERVER/);
  // Same hardware, different serving flags: the comparison says so.
  expect(comparison.warnings).toEqual([
    'serving.speculative differs: A mtp, B none',
    'serving.numSpeculativeTokens differs: A 1, B (not set)',
  ]);
  expect(json.stderr).toMatch(/warning: serving\.speculative differs: A mtp, B none/);
  const fastReport = JSON.parse(await readFile(fast, 'utf8'));
  expect(fastReport.target).toMatchObject({
    hardware: '1x NVIDIA H20 96 GB',
    serving: { speculative: 'mtp', numSpeculativeTokens: 1 },
    server: { engine: 'hat-test-server', models: [{ id: 'test-model' }] },
  });
  expect(await readFile(join(scratch, 'fast', 'report.html'), 'utf8')).toMatch(
    /<b>hardware<\/b>: 1x NVIDIA H20 96 GB · <b>engine<\/b>: hat-test-server/,
  );
  // The same seed gives the same intervals.
  expect(
    JSON.parse((await hat('replay', 'compare', fast, slow, '--json', '--seed', '7', '--resamples', '400')).stdout),
  ).toEqual(comparison);

  const same = await hat('replay', 'compare', fast, fast, '--metrics', 'ttft_ms,tpot_ms', '--resamples', '200');
  expect(same.code).toBe(0);
  expect(same.stdout).toMatch(/^ttft_ms\s+P50\s.*noise$/m);
  expect(same.stdout).toMatch(/no difference beyond run-to-run noise/);
  expect(same.stdout).not.toMatch(/WARNING/);
  const text = await hat('replay', 'compare', fast, slow, '--resamples', '200', '--percentiles', '50');
  expect(text.stdout).toMatch(/^ttft_ms\s+P50\s.*higher$/m);
  expect(text.stdout).toMatch(
    /^WARNING: serving\.speculative differs: A mtp, B none; the reports measured different serving setups$/m,
  );
});

it('refuses a file that is not a replay report, naming it (exit 2)', async () => {
  const bogus = join(scratch, 'bogus.json');
  await writeFile(bogus, JSON.stringify({ kind: 'something-else' }));
  const result = await hat('replay', 'compare', bogus, bogus);
  expect(result.code).toBe(2);
  expect(result.stderr).toMatch(/\[BAD_REPORT\].*bogus\.json is not a replay report/);
  const missing = await hat('replay', 'compare', join(scratch, 'nope.json'), bogus);
  expect(missing.code).toBe(2);
  expect(missing.stderr).toMatch(/\[REPORT_NOT_FOUND\].*nope\.json/);
});
