import type {
  GenerateOptions,
  GenerateRequest,
  GenerationResult,
  OnnxDecoder,
} from '../shared/models/onnx/onnx-decoder';
import { GenerationScheduler, type BatchSettings } from './generation-scheduler';

/**
 * The scheduler's queueing and batching, over a decoder that records the batches it is given
 * (its generation itself is covered against the real ONNX decoder in test/serve.int.test.ts).
 */
class RecordingDecoder {
  readonly batches: Array<{ prompts: number[][]; settings: GenerateOptions }> = [];
  release?: () => void;
  async generateBatch(requests: readonly GenerateRequest[], options: GenerateOptions): Promise<GenerationResult[]> {
    this.batches.push({ prompts: requests.map((request) => [...request.promptIds]), settings: options });
    if (this.batches.length === 1) await new Promise<void>((resolve) => (this.release = resolve));
    return requests.map((request) => ({
      promptIds: [...request.promptIds],
      tokenIds: [request.promptIds.length],
      finishReason: 'length',
      logprobTemperature: 1,
      sampling: { temperature: 1, topP: 1, topK: 0, seed: String(request.seed) },
      timings: { prefillMs: 0, ttftMs: 0, e2eMs: 0, itlMs: [] },
    }));
  }
}

const settings = (temperature: number): BatchSettings => ({
  maxNewTokens: 4,
  temperature,
  topP: 1,
  topK: 0,
  topLogprobs: 0,
  stopTokenIds: [],
});

describe('GenerationScheduler', () => {
  it('batches waiting jobs with the same settings, keeps others for later, and reports waiting/running', async () => {
    const decoder = new RecordingDecoder();
    const counts: Array<{ waiting: number; running: number }> = [];
    const scheduler = new GenerationScheduler(decoder as unknown as OnnxDecoder, 2, (value) => counts.push(value));
    const first = scheduler.generate({ promptIds: [1], seed: 'a', settings: settings(1) });
    // While the first batch runs, three more arrive: two share settings (batch of 2 = the cap), one differs.
    const second = scheduler.generate({ promptIds: [2, 2], seed: 'b', settings: settings(1) });
    const third = scheduler.generate({ promptIds: [3, 3, 3], seed: 'c', settings: settings(0.5) });
    const fourth = scheduler.generate({ promptIds: [4], seed: 'd', settings: settings(1) });
    const fifth = scheduler.generate({ promptIds: [5], seed: 'e', settings: settings(1) });
    expect(scheduler.counts).toEqual({ waiting: 4, running: 1 });
    decoder.release!();
    const results = await Promise.all([first, second, third, fourth, fifth]);
    expect(results.map((result) => result.tokenIds[0])).toEqual([1, 2, 3, 1, 1]);
    expect(decoder.batches.map((batch) => batch.prompts)).toEqual([[[1]], [[2, 2], [4]], [[3, 3, 3]], [[5]]]);
    expect(decoder.batches[2].settings.temperature).toBe(0.5);
    expect(counts[counts.length - 1]).toEqual({ waiting: 0, running: 0 });
    expect(Math.max(...counts.map((value) => value.running))).toBe(2);
  });

  it('runs a job queued while the previous work is finishing (no job is left waiting)', async () => {
    const decoder = new RecordingDecoder();
    decoder.batches.push({ prompts: [], settings: {} });
    const scheduler = new GenerationScheduler(decoder as unknown as OnnxDecoder, 4);
    // Callers queue generation a few microtasks after their scoring resolves (as the completions
    // handler does): whatever the gap, the drain loop may have ended by then and must start again.
    for (let hops = 0; hops < 8; hops++) {
      const chained = (async () => {
        await scheduler.exclusive(async () => 'scored');
        for (let hop = 0; hop < hops; hop++) await null;
        return scheduler.generate({ promptIds: [7], seed: 's', settings: settings(1) });
      })();
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise((resolve) => (timer = setTimeout(() => resolve('left waiting'), 2000)));
      await expect(Promise.race([chained, timeout])).resolves.toMatchObject({ tokenIds: [1] });
      clearTimeout(timer);
    }
    await scheduler.drained();
    expect(scheduler.counts).toEqual({ waiting: 0, running: 0 });
  });
});
