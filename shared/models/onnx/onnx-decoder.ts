import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import * as ort from 'onnxruntime-node';
import { BadInputError } from '../../errors';
import { Rng } from '../../random/rng';
import { abortedError } from '../model-clock';
import { readJsonObject } from './tokenizer-source';
import { LogitsHead, type HeadOutputs } from './logits-head';
import { argmaxOf, logprobTemperatureOf, sampleToken, topTokenIds, type SamplingParameters } from './token-sampler';

/** Session settings of an ONNX decoder. */
export interface OnnxDecoderOptions {
  /** onnxruntime intra-op threads. Default: onnxruntime's choice (one per physical core). */
  intraOpThreads?: number;
  /**
   * Most logits (floats) one forward call may return; longer prompts are fed in chunks through
   * the KV cache so a 150k vocabulary does not need gigabytes per prompt. Default 16M (64 MiB).
   */
  maxLogitsFloats?: number;
  /**
   * Most prompt tokens one forward call feeds when the model returns only the logits asked for
   * (`logits_to_keep`): bounds the attention scores' memory, not the logits'. Default 512.
   */
  maxPrefillChunkTokens?: number;
  /**
   * Prompts whose KV cache is kept for reuse (single-sequence generation): a prompt that starts
   * with a kept one feeds only the rest, as a serving engine's prefix cache does (an agent's next
   * call extends its previous context). 0 turns it off. Default 8, within 32M floats (128 MiB)
   * of kept caches all together.
   */
  prefixCacheEntries?: number;
}

/** What was loaded, for reports and manifests. */
export interface OnnxModelInfo {
  directory: string;
  modelFile: string;
  modelType: string;
  layers: number;
  keyValueHeads: number;
  headDim: number;
  vocabularySize: number;
  /** Token ids that end generation (config.json / generation_config.json `eos_token_id`). */
  eosTokenIds: number[];
  /** Token id fed in left padding (pad, else eos, else 0); its position is always masked. */
  padTokenId: number;
  /** Random weights (a `hat models make-dummy` model): reports using it must say so. */
  dummyWeights: boolean;
  /**
   * The model's input that limits logits to the last positions (`logits_to_keep` or
   * `num_logits_to_keep`), when it has one; without it every prompt position gets logits.
   */
  logitsToKeepInput?: string;
}

/** Log-probabilities of one token. */
export interface TokenScore {
  tokenId: number;
  /** log p at the result's `logprobTemperature`, over the whole vocabulary (before top-k/top-p). */
  logprob: number;
  /** log p at temperature 1. */
  rawLogprob: number;
  /** Most likely tokens at this position, most likely first, logprobs at `logprobTemperature`. */
  top?: Array<{ tokenId: number; logprob: number }>;
}

export interface GenerateOptions {
  /** New tokens at most. Default 256. */
  maxNewTokens?: number;
  /** 0 = greedy. Default 1. */
  temperature?: number;
  /** Default 1 (off). */
  topP?: number;
  /** 0 or less = off. Default 0. */
  topK?: number;
  /** Seed of a request that gives none. Default 0. */
  seed?: number | string;
  /** Token ids that end a sequence (kept as its last token). Default: the model's eos ids. */
  stopTokenIds?: number[];
  /** Return per-token logprobs. Default true (greedy decoding skips the per-step normalization without them). */
  logprobs?: boolean;
  /** Also return the n most likely tokens per position. Default 0. */
  topLogprobs?: number;
  /** Ends sequence `index` after its latest token when true (stop strings). */
  shouldStop?: (index: number, tokenIds: readonly number[]) => boolean;
  /** Called for every token as it is chosen (`score`: its logprobs, when `logprobs` is on). */
  onToken?: (event: { index: number; tokenId: number; atMs: number; score?: TokenScore }) => void;
  signal?: AbortSignal;
}

export interface GenerateRequest {
  promptIds: readonly number[];
  /** This sequence's seed; the same seed gives the same tokens alone or in any batch. */
  seed?: number | string;
}

export interface GenerationTimings {
  /** Feeding the prompt(s), ms. */
  prefillMs: number;
  /** Start to the first token chosen (prefill + first sampling), ms. */
  ttftMs: number;
  /** Start to the last token chosen, ms. */
  e2eMs: number;
  /** Gaps between consecutive tokens of this sequence, ms. */
  itlMs: number[];
}

export interface GenerationResult {
  promptIds: number[];
  tokenIds: number[];
  /** Per generated token, when `logprobs` is on. */
  tokens?: TokenScore[];
  finishReason: 'stop' | 'length';
  /** Temperature the logprobs are computed at: the sampling temperature, or 1 when greedy. */
  logprobTemperature: number;
  sampling: SamplingParameters & { seed: string };
  timings: GenerationTimings;
}

export interface ScoreRequest {
  /** At least one token: the first completion token is predicted from the prompt's last. */
  promptIds: readonly number[];
  completionIds: readonly number[];
}

export interface ScoreOptions {
  /** Temperature of the logprobs (0 means 1, as in generation). Default 1. */
  temperature?: number;
  /** Also return the n most likely tokens per completion position (teacher top-k). Default 0. */
  topLogprobs?: number;
  signal?: AbortSignal;
}

export interface ScoreResult {
  /** One per completion token. */
  tokens: TokenScore[];
  logprobTemperature: number;
}

/** Optimum's decoder naming, quoted in every mismatch error. */
const expectedNaming =
  'expected Optimum decoder naming: inputs input_ids, attention_mask, position_ids (int64) and past_key_values.N.key|value (float32, [batch, kv_heads, past, head_dim]); outputs logits and present.N.key|value; export with `optimum-cli export onnx --task text-generation-with-past`';

const modelFileCandidates = ['model.onnx', join('onnx', 'model.onnx')];

interface KeyValueCache {
  tensors: Record<string, ort.Tensor>;
}

/** A prompt's KV cache kept for a later prompt that starts with it. */
interface PrefixEntry {
  tokenIds: readonly number[];
  cache: KeyValueCache;
}

/** Shortest shared prefix worth reusing: below it a fresh prefill costs no more than the copy. */
const minimumReusedPrefix = 32;
/** Floats all kept prefix caches may hold together (128 MiB). */
const prefixCacheFloats = 32 * 1024 * 1024;

interface ForwardBatch {
  batchSize: number;
  /** Token ids of this call, [batch, length]. */
  inputIds: BigInt64Array;
  positionIds: BigInt64Array;
  /** Mask of the whole sequence so far including this call, [batch, total]. */
  attentionMask: BigInt64Array;
}

/**
 * A decoder-only ONNX language model run in-process with onnxruntime-node: prefill, then one
 * token per step feeding `present.*` back as `past_key_values.*`. Batches are left-padded, with
 * `attention_mask` hiding the padding and `position_ids` counting from each row's first real
 * token, so a sequence gets the same tokens alone or batched.
 */
export class OnnxDecoder {
  private constructor(
    private readonly session: ort.InferenceSession,
    private readonly head: LogitsHead,
    readonly info: OnnxModelInfo,
    private readonly maxLogitsFloats: number,
    private readonly maxPrefillChunkTokens: number,
    private readonly usesCacheBranch: boolean,
    /** Shape of the logits_to_keep input: a scalar or [1]. */
    private readonly logitsToKeepDims: number[],
    private readonly prefixCacheEntries: number,
  ) {}

  /** Kept prompt caches, most recently used first. */
  private readonly prefixes: PrefixEntry[] = [];
  /** Prompt tokens served from kept caches and fed, since load (for tests and reports). */
  readonly prefixStats = { reusedTokens: 0, fedTokens: 0 };

  /** Loads `model.onnx` (or `onnx/model.onnx`) and `config.json` and checks the model's inputs and outputs. */
  static async load(directory: string, options: OnnxDecoderOptions = {}): Promise<OnnxDecoder> {
    const root = resolve(directory);
    const modelFile = modelFileCandidates
      .map((candidate) => join(root, candidate))
      .find((candidate) => existsSync(candidate));
    if (!modelFile) {
      throw new BadInputError(
        'ONNX_MODEL_MISSING',
        `${root} has no ${modelFileCandidates.join(' or ')}; point the model directory at an Optimum ONNX export or run \`hat models make-dummy --out ${directory}\``,
      );
    }
    const config = readJsonObject(join(root, 'config.json'));
    const generationConfigFile = join(root, 'generation_config.json');
    const generationConfig = existsSync(generationConfigFile) ? readJsonObject(generationConfigFile) : {};
    const shape = modelShape(config, join(root, 'config.json'));
    let session: ort.InferenceSession;
    try {
      session = await ort.InferenceSession.create(modelFile, {
        ...(options.intraOpThreads === undefined ? {} : { intraOpNumThreads: options.intraOpThreads }),
        interOpNumThreads: 1,
        executionMode: 'sequential',
        graphOptimizationLevel: 'all',
      });
    } catch (error) {
      throw new BadInputError(
        'ONNX_MODEL_INVALID',
        `onnxruntime cannot load ${modelFile}: ${(error as Error).message}`,
        { cause: error },
      );
    }
    const { usesCacheBranch, logitsToKeep } = checkNaming(session, modelFile, shape.layers);
    const eosTokenIds = [...new Set([...idList(config.eos_token_id), ...idList(generationConfig.eos_token_id)])];
    const padTokenId =
      idList(config.pad_token_id)[0] ?? idList(generationConfig.pad_token_id)[0] ?? eosTokenIds[0] ?? 0;
    const info: OnnxModelInfo = {
      directory: root,
      modelFile,
      modelType: typeof config.model_type === 'string' ? config.model_type : 'unknown',
      ...shape,
      eosTokenIds,
      padTokenId,
      dummyWeights: config.hat_dummy_weights === true,
      ...(logitsToKeep ? { logitsToKeepInput: logitsToKeep.name } : {}),
    };
    const head = await LogitsHead.create(info.vocabularySize, options.intraOpThreads);
    return new OnnxDecoder(
      session,
      head,
      info,
      options.maxLogitsFloats ?? 16 * 1024 * 1024,
      options.maxPrefillChunkTokens ?? 512,
      usesCacheBranch,
      logitsToKeep?.dims ?? [],
      options.prefixCacheEntries ?? 8,
    );
  }

  async close(): Promise<void> {
    await Promise.all([this.session.release(), this.head.close()]);
  }

  /** Generates from one prompt. */
  async generate(promptIds: readonly number[], options: GenerateOptions = {}): Promise<GenerationResult> {
    const [result] = await this.generateBatch([{ promptIds, seed: options.seed }], options);
    return result;
  }

  /** Generates from several prompts in one left-padded batch; each sequence stops on its own. */
  async generateBatch(
    requests: readonly GenerateRequest[],
    options: GenerateOptions = {},
  ): Promise<GenerationResult[]> {
    const started = performance.now();
    const sampling: SamplingParameters = {
      temperature: options.temperature ?? 1,
      topP: options.topP ?? 1,
      topK: options.topK ?? 0,
    };
    checkSampling(sampling);
    const maxNewTokens = options.maxNewTokens ?? 256;
    const logprobTemperature = logprobTemperatureOf(sampling.temperature);
    const wantLogprobs = options.logprobs ?? true;
    const topLogprobs = options.topLogprobs ?? 0;
    const stopTokenIds = new Set(options.stopTokenIds ?? this.info.eosTokenIds);
    const batchSize = requests.length;
    if (batchSize === 0) return [];
    requests.forEach((request, index) => this.checkTokenIds(request.promptIds, `requests[${index}].promptIds`, true));
    const seeds = requests.map((request) => String(request.seed ?? options.seed ?? 0));
    const rngs = seeds.map((seed) => new Rng(seed));
    const rows = requests.map((request) => ({
      promptIds: [...request.promptIds],
      tokenIds: [] as number[],
      tokens: wantLogprobs ? ([] as TokenScore[]) : undefined,
      finishReason: undefined as 'stop' | 'length' | undefined,
      nextPosition: request.promptIds.length,
      tokenTimes: [] as number[],
    }));

    // Left padding: every prompt ends at the same column, so one step serves every row.
    const promptLength = Math.max(...requests.map((request) => request.promptIds.length));
    const padded = this.leftPad(
      requests.map((request) => request.promptIds),
      promptLength,
    );
    let { cache, lastLogits } = await this.prefill(
      padded,
      promptLength,
      options.signal,
      batchSize === 1 ? requests[0].promptIds : undefined,
    );
    const prefillMs = performance.now() - started;
    const attentionMask = padded.attentionMask;
    const maskColumns: number[][] = Array.from({ length: batchSize }, (_, row) =>
      Array.from(attentionMask.subarray(row * promptLength, (row + 1) * promptLength), Number),
    );

    const vocabularySize = this.info.vocabularySize;
    for (let step = 0; step < maxNewTokens; step++) {
      const nextIds = new BigInt64Array(batchSize);
      const nextPositions = new BigInt64Array(batchSize);
      const head =
        wantLogprobs || sampling.temperature > 0
          ? await this.head.run(lastLogits, logprobTemperature, {
              probabilities: sampling.temperature > 0,
              logprobs: wantLogprobs,
            })
          : undefined;
      for (let row = 0; row < batchSize; row++) {
        const state = rows[row];
        if (state.finishReason) {
          nextIds[row] = BigInt(this.info.padTokenId);
          maskColumns[row].push(0);
          continue;
        }
        const base = row * vocabularySize;
        const logits = lastLogits.subarray(base, base + vocabularySize);
        const tokenId = head?.probabilities
          ? sampleToken(head.probabilities.subarray(base, base + vocabularySize), sampling, rngs[row])
          : argmaxOf(logits);
        if (head && state.tokens) state.tokens.push(tokenScore(head, base, logits, tokenId, topLogprobs));
        const atMs = performance.now() - started;
        state.tokenIds.push(tokenId);
        state.tokenTimes.push(atMs);
        options.onToken?.({ index: row, tokenId, atMs, score: state.tokens?.[state.tokens.length - 1] });
        if (stopTokenIds.has(tokenId) || options.shouldStop?.(row, state.tokenIds)) state.finishReason = 'stop';
        else if (state.tokenIds.length >= maxNewTokens) state.finishReason = 'length';
        nextIds[row] = BigInt(tokenId);
        nextPositions[row] = BigInt(state.nextPosition++);
        maskColumns[row].push(state.finishReason ? 0 : 1);
      }
      if (rows.every((state) => state.finishReason)) break;
      if (options.signal?.aborted) throw abortedError(options.signal);
      const output = await this.forward(
        {
          batchSize,
          inputIds: nextIds,
          positionIds: nextPositions,
          attentionMask: BigInt64Array.from(maskColumns.flat(), BigInt),
        },
        cache,
      );
      cache = output.cache;
      lastLogits = output.logits;
    }
    return rows.map((state, row) => ({
      promptIds: state.promptIds,
      tokenIds: state.tokenIds,
      tokens: state.tokens,
      finishReason: state.finishReason ?? 'length',
      logprobTemperature,
      sampling: { ...sampling, seed: seeds[row] },
      timings: {
        prefillMs,
        ttftMs: state.tokenTimes[0] ?? prefillMs,
        e2eMs: state.tokenTimes[state.tokenTimes.length - 1] ?? prefillMs,
        itlMs: state.tokenTimes.slice(1).map((time, index) => time - state.tokenTimes[index]),
      },
    }));
  }

  /** Log-probabilities of given completion tokens after a prompt, from one pass over both. */
  async score(
    promptIds: readonly number[],
    completionIds: readonly number[],
    options: ScoreOptions = {},
  ): Promise<ScoreResult> {
    const [result] = await this.scoreBatch([{ promptIds, completionIds }], options);
    return result;
  }

  /** Scores several prompt/completion pairs in one left-padded batch. */
  async scoreBatch(requests: readonly ScoreRequest[], options: ScoreOptions = {}): Promise<ScoreResult[]> {
    const logprobTemperature = logprobTemperatureOf(options.temperature ?? 1);
    const topLogprobs = options.topLogprobs ?? 0;
    if (requests.length === 0) return [];
    requests.forEach((request, index) => {
      this.checkTokenIds(request.promptIds, `requests[${index}].promptIds`, true);
      this.checkTokenIds(request.completionIds, `requests[${index}].completionIds`, false);
    });
    // The last completion token predicts nothing we score, so it is not fed.
    const sequences = requests.map((request) => [...request.promptIds, ...request.completionIds].slice(0, -1));
    const length = Math.max(...sequences.map((sequence) => sequence.length));
    const results: ScoreResult[] = requests.map(() => ({ tokens: [], logprobTemperature }));
    const padded = this.leftPad(sequences, length);
    const vocabularySize = this.info.vocabularySize;
    // Left padding ends every row at the last column, so the scored positions are the last
    // (longest completion) columns: only they need logits.
    const scoredColumns = Math.max(...requests.map((request) => request.completionIds.length));
    await this.feed(padded, length, options.signal, length - scoredColumns, async (logits, firstColumn, rows) => {
      // Only positions that predict a completion token are normalized, gathered into one block.
      const wanted: Array<{ row: number; tokenId: number; offset: number }> = [];
      requests.forEach((request, row) => {
        const padding = length - sequences[row].length;
        for (let offset = 0; offset < rows; offset++) {
          // Column c holds sequence token c - padding, which predicts token c - padding + 1.
          const completionIndex = firstColumn + offset - padding + 1 - request.promptIds.length;
          if (completionIndex < 0 || completionIndex >= request.completionIds.length) continue;
          wanted.push({
            row,
            tokenId: request.completionIds[completionIndex],
            offset: (row * rows + offset) * vocabularySize,
          });
        }
      });
      if (wanted.length === 0) return;
      const gathered = new Float32Array(wanted.length * vocabularySize);
      wanted.forEach((entry, index) =>
        gathered.set(logits.subarray(entry.offset, entry.offset + vocabularySize), index * vocabularySize),
      );
      const head = await this.head.run(gathered, logprobTemperature, { probabilities: false });
      wanted.forEach((entry, index) => {
        const base = index * vocabularySize;
        results[entry.row].tokens.push(
          tokenScore(head, base, gathered.subarray(base, base + vocabularySize), entry.tokenId, topLogprobs),
        );
      });
    });
    return results;
  }

  /**
   * Logits of every position of one sequence, [length × vocabulary], fed `chunkTokens` at a time
   * through the KV cache (default: all at once). For checking the cache against a full pass.
   */
  async logits(tokenIds: readonly number[], options: { chunkTokens?: number } = {}): Promise<Float32Array> {
    this.checkTokenIds(tokenIds, 'tokenIds', true);
    const vocabularySize = this.info.vocabularySize;
    const all = new Float32Array(tokenIds.length * vocabularySize);
    await this.feed(
      this.leftPad([tokenIds], tokenIds.length),
      tokenIds.length,
      undefined,
      0,
      (logits, firstColumn) => all.set(logits, firstColumn * vocabularySize),
      options.chunkTokens,
    );
    return all;
  }

  private checkTokenIds(tokenIds: readonly number[], field: string, nonEmpty: boolean): void {
    if (nonEmpty && tokenIds.length === 0)
      throw new BadInputError('ONNX_BAD_TOKENS', `${field} is empty; give at least one token id`);
    const bad = tokenIds.find(
      (tokenId) => !Number.isInteger(tokenId) || tokenId < 0 || tokenId >= this.info.vocabularySize,
    );
    if (bad !== undefined)
      throw new BadInputError(
        'ONNX_BAD_TOKENS',
        `${field} holds token id ${bad}, outside this model's vocabulary [0, ${this.info.vocabularySize}); use ids from the model's own tokenizer`,
      );
  }

  private leftPad(sequences: ReadonlyArray<readonly number[]>, length: number): ForwardBatch {
    const batchSize = sequences.length;
    const inputIds = new BigInt64Array(batchSize * length).fill(BigInt(this.info.padTokenId));
    const positionIds = new BigInt64Array(batchSize * length);
    const attentionMask = new BigInt64Array(batchSize * length);
    sequences.forEach((sequence, row) => {
      const padding = length - sequence.length;
      sequence.forEach((tokenId, index) => {
        const column = row * length + padding + index;
        inputIds[column] = BigInt(tokenId);
        positionIds[column] = BigInt(index);
        attentionMask[column] = 1n;
      });
    });
    return { batchSize, inputIds, positionIds, attentionMask };
  }

  /** Feeds a whole padded batch and returns the cache and the last column's logits, [batch × vocabulary]. */
  /**
   * Feeds a whole padded batch and returns the cache and the last column's logits. A single
   * prompt (`single`) that starts with a kept prompt resumes from that prompt's cache, cut to the
   * shared prefix, and its own cache is kept in turn.
   */
  private async prefill(
    padded: ForwardBatch,
    length: number,
    signal: AbortSignal | undefined,
    single?: readonly number[],
  ): Promise<{ cache: KeyValueCache; lastLogits: Float32Array }> {
    const vocabularySize = this.info.vocabularySize;
    const lastLogits = new Float32Array(padded.batchSize * vocabularySize);
    const resume = single ? this.longestPrefix(single) : undefined;
    const cache = await this.feed(
      padded,
      length,
      signal,
      length - 1,
      (logits, firstColumn, rows) => {
        if (firstColumn + rows !== length) return;
        for (let row = 0; row < padded.batchSize; row++) {
          const base = (row * rows + rows - 1) * vocabularySize;
          lastLogits.set(logits.subarray(base, base + vocabularySize), row * vocabularySize);
        }
      },
      undefined,
      resume,
    );
    if (single && this.prefixCacheEntries > 0) {
      this.prefixStats.reusedTokens += resume?.start ?? 0;
      this.prefixStats.fedTokens += length - (resume?.start ?? 0);
      this.prefixes.unshift({ tokenIds: [...single], cache });
      // At most the configured count, and within the memory budget (the newest always stays).
      const perToken = this.info.layers * 2 * this.info.keyValueHeads * this.info.headDim;
      let floats = 0;
      const kept = this.prefixes.findIndex((entry, index) => {
        floats += entry.tokenIds.length * perToken;
        return index >= this.prefixCacheEntries || (index > 0 && floats > prefixCacheFloats);
      });
      if (kept >= 0) this.prefixes.length = kept;
    }
    return { cache, lastLogits };
  }

  /**
   * The kept cache sharing the longest prefix with `tokenIds` (at least one token is left to feed,
   * for its logits), cut to that prefix; undefined when none shares `minimumReusedPrefix` tokens.
   */
  private longestPrefix(tokenIds: readonly number[]): { start: number; cache: KeyValueCache } | undefined {
    let best: { entry: PrefixEntry; length: number } | undefined;
    for (const entry of this.prefixes) {
      const limit = Math.min(entry.tokenIds.length, tokenIds.length - 1);
      let shared = 0;
      while (shared < limit && entry.tokenIds[shared] === tokenIds[shared]) shared++;
      if (shared >= minimumReusedPrefix && (!best || shared > best.length)) best = { entry, length: shared };
    }
    if (!best) return undefined;
    // Most recently used first: an agent's sessions keep their own prefixes warm.
    this.prefixes.splice(this.prefixes.indexOf(best.entry), 1);
    this.prefixes.unshift(best.entry);
    return { start: best.length, cache: this.cutCache(best.entry.cache, best.length) };
  }

  /** The first `length` positions of a batch-1 cache ([1, kv_heads, total, head_dim] per tensor), copied. */
  private cutCache(cache: KeyValueCache, length: number): KeyValueCache {
    const { keyValueHeads, headDim } = this.info;
    const tensors: Record<string, ort.Tensor> = {};
    for (const [name, tensor] of Object.entries(cache.tensors)) {
      const total = tensor.dims[2];
      const data = tensor.data as Float32Array;
      const cut = new Float32Array(keyValueHeads * length * headDim);
      for (let head = 0; head < keyValueHeads; head++)
        cut.set(data.subarray(head * total * headDim, (head * total + length) * headDim), head * length * headDim);
      tensors[name] = new ort.Tensor('float32', cut, [1, keyValueHeads, length, headDim]);
    }
    return { tensors };
  }

  /**
   * Runs a padded batch through the model in column chunks, handing each chunk's logits
   * [batch, rows, vocabulary] to `onLogits` with the column of its first row. Columns from
   * `neededFrom` on need logits. A model with `logits_to_keep` returns only those rows (at
   * least one per call), so chunks before them are bounded by maxPrefillChunkTokens and chunks
   * with them by maxLogitsFloats; a model without it returns every row of every chunk, so every
   * chunk is bounded by maxLogitsFloats. `chunkTokens` fixes the chunk size instead.
   */
  private async feed(
    padded: ForwardBatch,
    length: number,
    signal: AbortSignal | undefined,
    neededFrom: number,
    onLogits: (logits: Float32Array, firstColumn: number, rows: number) => void | Promise<void>,
    chunkTokens?: number,
    resume?: { start: number; cache: KeyValueCache },
  ): Promise<KeyValueCache> {
    const { batchSize } = padded;
    const vocabularySize = this.info.vocabularySize;
    const logitsRows = Math.max(1, Math.floor(this.maxLogitsFloats / (batchSize * vocabularySize)));
    const keeps = this.info.logitsToKeepInput !== undefined;
    const chunkEnd = (start: number): number => {
      if (chunkTokens !== undefined) return Math.min(length, start + Math.max(1, chunkTokens));
      if (!keeps) return Math.min(length, start + logitsRows);
      return Math.min(length, start + this.maxPrefillChunkTokens, Math.max(start, neededFrom) + logitsRows);
    };
    let cache = resume?.cache ?? this.emptyCache(batchSize);
    const first = resume?.start ?? 0;
    for (let start = first, end = chunkEnd(first); start < length; start = end, end = chunkEnd(start)) {
      if (signal?.aborted) throw abortedError(signal);
      const columns = (source: BigInt64Array, from: number, to: number): BigInt64Array => {
        const out = new BigInt64Array(batchSize * (to - from));
        for (let row = 0; row < batchSize; row++)
          out.set(source.subarray(row * length + from, row * length + to), row * (to - from));
        return out;
      };
      // transformers' semantics: 0 would keep every row, so a chunk needing none keeps one.
      const keep = Math.max(1, end - Math.max(start, neededFrom));
      const output = await this.forward(
        {
          batchSize,
          inputIds: columns(padded.inputIds, start, end),
          positionIds: columns(padded.positionIds, start, end),
          attentionMask: columns(padded.attentionMask, 0, end),
        },
        cache,
        keep,
      );
      cache = output.cache;
      const rows = output.logits.length / (batchSize * vocabularySize);
      if (end > neededFrom) await onLogits(output.logits, end - rows, rows);
    }
    return cache;
  }

  private emptyCache(batchSize: number): KeyValueCache {
    const tensors: Record<string, ort.Tensor> = {};
    for (let layer = 0; layer < this.info.layers; layer++) {
      for (const part of ['key', 'value']) {
        tensors[`past_key_values.${layer}.${part}`] = new ort.Tensor('float32', new Float32Array(0), [
          batchSize,
          this.info.keyValueHeads,
          0,
          this.info.headDim,
        ]);
      }
    }
    return { tensors };
  }

  /** One session run; `present.*` come back as the next call's `past_key_values.*` without copying. */
  private async forward(
    batch: ForwardBatch,
    cache: KeyValueCache,
    logitsToKeep = 1,
  ): Promise<{ logits: Float32Array; cache: KeyValueCache }> {
    const length = batch.inputIds.length / batch.batchSize;
    const total = batch.attentionMask.length / batch.batchSize;
    const feeds: Record<string, ort.Tensor> = {
      input_ids: new ort.Tensor('int64', batch.inputIds, [batch.batchSize, length]),
      attention_mask: new ort.Tensor('int64', batch.attentionMask, [batch.batchSize, total]),
      position_ids: new ort.Tensor('int64', batch.positionIds, [batch.batchSize, length]),
      ...cache.tensors,
    };
    if (this.usesCacheBranch)
      feeds.use_cache_branch = new ort.Tensor('bool', Uint8Array.of(total > length ? 1 : 0), [1]);
    if (this.info.logitsToKeepInput !== undefined)
      feeds[this.info.logitsToKeepInput] = new ort.Tensor(
        'int64',
        BigInt64Array.of(BigInt(logitsToKeep)),
        this.logitsToKeepDims,
      );
    const outputs = await this.session.run(feeds);
    const tensors: Record<string, ort.Tensor> = {};
    for (let layer = 0; layer < this.info.layers; layer++) {
      tensors[`past_key_values.${layer}.key`] = outputs[`present.${layer}.key`];
      tensors[`past_key_values.${layer}.value`] = outputs[`present.${layer}.value`];
    }
    return { logits: outputs.logits.data as Float32Array, cache: { tensors } };
  }
}

/** A token's logprobs from normalized rows; `base` is the row's offset in `head`'s arrays. */
function tokenScore(
  head: HeadOutputs,
  base: number,
  logits: Float32Array,
  tokenId: number,
  topLogprobs: number,
): TokenScore {
  const score: TokenScore = {
    tokenId,
    logprob: head.logprobs[base + tokenId],
    rawLogprob: head.rawLogprobs[base + tokenId],
  };
  if (topLogprobs > 0)
    score.top = topTokenIds(logits, topLogprobs).map((id) => ({ tokenId: id, logprob: head.logprobs[base + id] }));
  return score;
}

function checkSampling(sampling: SamplingParameters): void {
  if (!(sampling.temperature >= 0))
    throw new BadInputError('ONNX_BAD_SAMPLING', `temperature must be >= 0 (got ${sampling.temperature})`);
  if (!(sampling.topP > 0 && sampling.topP <= 1))
    throw new BadInputError('ONNX_BAD_SAMPLING', `topP must be in (0, 1] (got ${sampling.topP})`);
  if (!Number.isInteger(sampling.topK))
    throw new BadInputError('ONNX_BAD_SAMPLING', `topK must be an integer (got ${sampling.topK})`);
}

function idList(value: unknown): number[] {
  if (typeof value === 'number') return [value];
  if (Array.isArray(value)) return value.filter((item): item is number => typeof item === 'number');
  return [];
}

function modelShape(
  config: Record<string, unknown>,
  file: string,
): Pick<OnnxModelInfo, 'layers' | 'keyValueHeads' | 'headDim' | 'vocabularySize'> {
  const positive = (field: string): number | undefined => {
    const value = config[field];
    return typeof value === 'number' && Number.isInteger(value) && value > 0 ? value : undefined;
  };
  const required = (field: string, value: number | undefined): number => {
    if (value === undefined)
      throw new BadInputError(
        'ONNX_MODEL_MISMATCH',
        `${file} has no positive integer "${field}"; a decoder config.json needs num_hidden_layers, num_attention_heads, hidden_size (or head_dim) and vocab_size`,
      );
    return value;
  };
  const heads = positive('num_attention_heads');
  const hidden = positive('hidden_size');
  return {
    layers: required('num_hidden_layers', positive('num_hidden_layers')),
    keyValueHeads: required('num_key_value_heads', positive('num_key_value_heads') ?? heads),
    headDim: required('head_dim', positive('head_dim') ?? (heads && hidden ? hidden / heads : undefined)),
    vocabularySize: required('vocab_size', positive('vocab_size')),
  };
}

/** Inputs that limit the logits to the last positions, as exports name them (transformers' `logits_to_keep`, formerly `num_logits_to_keep`). */
const logitsToKeepNames = ['logits_to_keep', 'num_logits_to_keep'];

/**
 * Checks the session against Optimum's naming; returns whether it has a merged-decoder
 * `use_cache_branch` input and a `logits_to_keep` input (with its shape: a scalar or [1]).
 */
function checkNaming(
  session: ort.InferenceSession,
  modelFile: string,
  layers: number,
): { usesCacheBranch: boolean; logitsToKeep?: { name: string; dims: number[] } } {
  const problems: string[] = [];
  const inputTypes = new Map(
    session.inputMetadata.map((meta) => [meta.name, meta.isTensor ? meta.type : 'non-tensor']),
  );
  const outputTypes = new Map(
    session.outputMetadata.map((meta) => [meta.name, meta.isTensor ? meta.type : 'non-tensor']),
  );
  const expectInput = (name: string, type: string): void => {
    const actual = inputTypes.get(name);
    if (actual === undefined) problems.push(`has no input "${name}"`);
    else if (actual !== type) problems.push(`input "${name}" is ${actual}, not ${type}`);
  };
  const expectOutput = (name: string, type: string): void => {
    const actual = outputTypes.get(name);
    if (actual === undefined) problems.push(`has no output "${name}"`);
    else if (actual !== type) problems.push(`output "${name}" is ${actual}, not ${type}`);
  };
  for (const name of ['input_ids', 'attention_mask', 'position_ids']) expectInput(name, 'int64');
  expectOutput('logits', 'float32');
  const known = new Set(['input_ids', 'attention_mask', 'position_ids', 'use_cache_branch', ...logitsToKeepNames]);
  for (let layer = 0; layer < layers; layer++) {
    for (const part of ['key', 'value']) {
      expectInput(`past_key_values.${layer}.${part}`, 'float32');
      expectOutput(`present.${layer}.${part}`, 'float32');
      known.add(`past_key_values.${layer}.${part}`);
    }
  }
  for (const name of inputTypes.keys()) {
    if (!known.has(name))
      problems.push(`has an input "${name}" this backend does not feed (config.json says num_hidden_layers=${layers})`);
  }
  if (problems.length > 0) {
    throw new BadInputError('ONNX_MODEL_MISMATCH', `${modelFile} ${problems.join('; ')}; ${expectedNaming}`, {
      details: { modelFile, problems },
    });
  }
  const keepMeta = session.inputMetadata.find((meta) => logitsToKeepNames.includes(meta.name));
  let logitsToKeep: { name: string; dims: number[] } | undefined;
  if (keepMeta) {
    const shape = keepMeta.isTensor ? keepMeta.shape : [];
    if (inputTypes.get(keepMeta.name) !== 'int64' || shape.length > 1) {
      throw new BadInputError(
        'ONNX_MODEL_MISMATCH',
        `${modelFile} input "${keepMeta.name}" must be an int64 scalar or [1] (got ${inputTypes.get(keepMeta.name)} [${shape.join(', ')}]); ${expectedNaming}`,
      );
    }
    logitsToKeep = { name: keepMeta.name, dims: shape.length === 0 ? [] : [1] };
  }
  return { usesCacheBranch: inputTypes.has('use_cache_branch'), ...(logitsToKeep ? { logitsToKeep } : {}) };
}
