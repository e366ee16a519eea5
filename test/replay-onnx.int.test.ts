/** @jest-environment ./shared/models/onnx/onnx-jest-environment.js */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runStageLocally } from '../queues/stage-kit/run-stage-locally';
import { openArtifactObject } from '../shared/artifacts/create-artifact-store';
import { FileArtifactStore } from '../shared/artifacts/file-artifact-store';
import { writeJsonl } from '../shared/artifacts/jsonl-writer';
import { silentLogger } from '../shared/log/logger';
import { makeDummyDecoder } from '../shared/models/onnx/dummy-decoder';
import { registerModelAdapters } from '../workers/register-model-adapters';

registerModelAdapters();
import type { ReplayReport } from '../workers/replay/replay-report';
import { replayStage } from '../workers/replay/processor';
import { syntheticSessions } from '../workers/replay/testing/synthetic-sessions';

/** Any registered model adapter is a replay target: here the in-process ONNX backend with random weights. */
it('replays against an in-process dummy-weight ONNX model and labels it as such on top of the report', async () => {
  const directory = await mkdtemp(join(tmpdir(), 'hat-replay-onnx-'));
  try {
    const modelDir = join(directory, 'tiny-model');
    makeDummyDecoder({ outDir: modelDir, tokenizer: 'bytes', hidden: 16, layers: 2, seed: 3 });
    const store = new FileArtifactStore(join(directory, 'out'));
    const sessions = await writeJsonl(
      store,
      'sessions.jsonl.gz',
      syntheticSessions({ count: 3, toolMs: 1, completionTokens: 6 }),
    );
    await runStageLocally(
      replayStage,
      {
        inputs: [sessions.uri],
        target: { adapter: 'onnx', modelDir, intraOpThreads: 1, sampling: { temperature: 0 } },
        load: { kind: 'closed', concurrency: 2 },
      },
      { store, openObject: (uri) => openArtifactObject(uri), logger: silentLogger() },
    );
    const report = JSON.parse((await store.getBuffer('report.json')).toString('utf8')) as ReplayReport;
    expect(report.target).toMatchObject({
      provider: 'onnx',
      dummyWeights: true,
      simulated: true,
      warning: expect.stringContaining('DUMMY-WEIGHT MODEL'),
    });
    expect(report.counts).toMatchObject({ sessions: 3, calls: 6, callsFailed: 0 });
    // Output capped at the recorded length (6 tokens), counted by the model itself.
    expect(report.metrics.output_tokens.summary.max).toBeLessThanOrEqual(6);
    expect(report.metrics.ttft_ms.summary.count).toBe(6);
    expect(report.specDecode).toMatchObject({ available: false, note: expect.stringContaining('no metrics endpoint') });
    const html = (await store.getBuffer('report.html')).toString('utf8');
    expect(html.indexOf('DUMMY-WEIGHT MODEL')).toBeLessThan(html.indexOf('<h2>'));
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
});
