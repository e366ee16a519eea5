import type { GenerationResult, OnnxDecoder, TokenScore } from '../shared/models/onnx/onnx-decoder';

/** Sampling settings shared by every row of one decoder batch. */
export interface BatchSettings {
  maxNewTokens: number;
  temperature: number;
  topP: number;
  topK: number;
  /** Top alternatives per token (0 = the sampled token's logprob only). */
  topLogprobs: number;
  stopTokenIds: number[];
}

/** One sequence to generate. */
export interface GenerationJob {
  promptIds: readonly number[];
  seed: string;
  settings: BatchSettings;
  /** Ends this sequence after its latest token (stop strings, a client that went away). */
  shouldStop?: (tokenIds: readonly number[]) => boolean;
  /** Every chosen token, as it is chosen, with its logprobs. */
  onToken?: (tokenId: number, score: TokenScore | undefined) => void;
  /** Called when the job leaves the queue and its batch starts. */
  onStart?: () => void;
}

interface QueuedGeneration {
  kind: 'generate';
  job: GenerationJob;
  key: string;
  resolve: (result: GenerationResult) => void;
  reject: (error: unknown) => void;
}

interface QueuedWork {
  kind: 'work';
  work: (decoder: OnnxDecoder) => Promise<unknown>;
  onStart?: () => void;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- holds the resolve of a Promise<T> for any T
  resolve: (result: any) => void;
  reject: (error: unknown) => void;
}

export interface SchedulerCounts {
  waiting: number;
  running: number;
}

/**
 * Runs generation on one ONNX decoder. onnxruntime runs one session call at a time, so decoder
 * work is serialized; requests that wait together and share sampling settings (temperature,
 * top-p, top-k, max tokens, logprobs) are decoded as one left-padded batch
 * (OnnxDecoder.generateBatch), each row with its own seed, which gives the same tokens as
 * alone. Others wait in arrival order. This is static batching: a batch runs until its longest
 * row ends, and requests that arrive meanwhile wait for the next batch.
 */
export class GenerationScheduler {
  private readonly queue: Array<QueuedGeneration | QueuedWork> = [];
  private runningCount = 0;
  private draining = false;
  private idle: Promise<void> = Promise.resolve();

  constructor(
    private readonly decoder: OnnxDecoder,
    private readonly maxBatchSize: number,
    private readonly onCountsChanged: (counts: SchedulerCounts) => void = () => undefined,
  ) {}

  get counts(): SchedulerCounts {
    return {
      waiting: this.queue.reduce((sum, entry) => sum + (entry.kind === 'generate' ? 1 : 0), 0),
      running: this.runningCount,
    };
  }

  generate(job: GenerationJob): Promise<GenerationResult> {
    return new Promise((resolve, reject) => {
      this.queue.push({ kind: 'generate', job, key: JSON.stringify(job.settings), resolve, reject });
      this.changed();
      this.pump();
    });
  }

  /** Runs other decoder work (prompt scoring, ranks) in turn with generation. */
  exclusive<T>(work: (decoder: OnnxDecoder) => Promise<T>, onStart?: () => void): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ kind: 'work', work, onStart, resolve, reject });
      this.pump();
    });
  }

  /** Resolves when everything queued so far has run. */
  async drained(): Promise<void> {
    while (this.draining || this.queue.length > 0) await this.idle;
  }

  private changed(): void {
    this.onCountsChanged(this.counts);
  }

  private pump(): void {
    if (this.draining) return;
    this.draining = true;
    this.idle = this.drain().finally(() => {
      this.draining = false;
      // Work queued after the loop's last look but before this callback would otherwise wait forever.
      if (this.queue.length > 0) this.pump();
    });
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      const head = this.queue.shift()!;
      if (head.kind === 'work') {
        head.onStart?.();
        await head.work(this.decoder).then(head.resolve, head.reject);
        continue;
      }
      const batch: QueuedGeneration[] = [head];
      for (let index = 0; index < this.queue.length && batch.length < this.maxBatchSize;) {
        const entry = this.queue[index];
        if (entry.kind === 'generate' && entry.key === head.key) {
          batch.push(entry);
          this.queue.splice(index, 1);
        } else index++;
      }
      this.runningCount = batch.length;
      for (const entry of batch) entry.job.onStart?.();
      this.changed();
      await this.runBatch(batch);
      this.runningCount = 0;
      this.changed();
    }
  }

  private async runBatch(batch: QueuedGeneration[]): Promise<void> {
    const settings = batch[0].job.settings;
    try {
      const results = await this.decoder.generateBatch(
        batch.map((entry) => ({ promptIds: entry.job.promptIds, seed: entry.job.seed })),
        {
          maxNewTokens: settings.maxNewTokens,
          temperature: settings.temperature,
          topP: settings.topP,
          topK: settings.topK,
          logprobs: true,
          topLogprobs: settings.topLogprobs,
          stopTokenIds: settings.stopTokenIds,
          shouldStop: (index, tokenIds) => batch[index].job.shouldStop?.(tokenIds) ?? false,
          onToken: ({ index, tokenId, score }) => batch[index].job.onToken?.(tokenId, score),
        },
      );
      results.forEach((result, index) => batch[index].resolve(result));
    } catch (error) {
      for (const entry of batch) entry.reject(error);
    }
  }
}
