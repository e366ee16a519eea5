import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  openSync,
  closeSync,
  writeSync,
  renameSync,
  writeFileSync,
  readFileSync,
} from 'node:fs';
import { join, resolve } from 'node:path';
import { BadInputError } from '../../errors';
import { Rng } from '../../random/rng';
import { version } from '../../version';
import { OnnxGraphBuilder, floatAttribute } from './onnx-graph-builder';
import { resolveTokenizerFiles, specialTokenContent, tokenizerVocabularySize } from './tokenizer-source';

/** Shape and source of a random-weight decoder written by `makeDummyDecoder`. */
export interface DummyDecoderOptions {
  /** Model directory to write (created when missing). */
  outDir: string;
  /** `qwen3` (default), `deepseek_v3`, `llama3_1`, `bytes`, or a directory with tokenizer files. */
  tokenizer?: string;
  /** Decoder layers. Default 2. */
  layers?: number;
  /** Hidden size. Default 64. */
  hidden?: number;
  /** Attention (query) heads. Default 4. */
  heads?: number;
  /** Key/value heads; must divide `heads` (grouped-query attention). Default 2. */
  kvHeads?: number;
  /** MLP inner size. Default 2 × hidden. */
  intermediate?: number;
  /** Weight seed: the same seed and shape give a byte-identical model.onnx. Default 0. */
  seed?: string | number;
  /**
   * Give the model the `logits_to_keep` input. Default true; false makes a model that returns
   * logits for every position, like an export without it (to measure what that costs).
   */
  logitsToKeep?: boolean;
}

/** config.json of a dummy decoder (Hugging Face field names). */
export interface DummyDecoderConfig {
  architectures: string[];
  model_type: string;
  num_hidden_layers: number;
  num_attention_heads: number;
  num_key_value_heads: number;
  hidden_size: number;
  head_dim: number;
  intermediate_size: number;
  vocab_size: number;
  max_position_embeddings: number;
  rope_theta: number;
  layer_norm_eps: number;
  tie_word_embeddings: boolean;
  torch_dtype: 'float32';
  eos_token_id: number | null;
  pad_token_id: number | null;
  bos_token_id: number | null;
  /** Random weights: every report and manifest that uses this model must say so. */
  hat_dummy_weights: true;
  hat_dummy_seed: string;
  hat_dummy_tokenizer: string;
}

export interface DummyDecoderResult {
  outDir: string;
  config: DummyDecoderConfig;
  /** Files written, relative to outDir. */
  files: string[];
  /** sha256 of model.onnx. */
  modelSha256: string;
  modelBytes: number;
}

const opsetVersion = 17;
/** Optional input of the decoder: how many trailing positions get logits (0: all), as transformers' `logits_to_keep`. */
export const logitsToKeepInput = 'logits_to_keep';
/** Bumped when the graph changes, so cached dummy models made by an older graph are made again. */
export const dummyGraphVersion = 2;
const ropeTheta = 10000;
const layerNormEpsilon = 1e-5;

/**
 * Writes a small random-weight decoder-only model in Hugging Face Optimum's ONNX layout
 * (`input_ids`, `attention_mask`, `position_ids`, `past_key_values.N.key|value` -> `logits`,
 * `present.N.key|value`; plus a scalar `logits_to_keep`) for a tokenizer's vocabulary, plus
 * config.json and the tokenizer files.
 *
 * Architecture: tied token embedding (input and LM head share one matrix, halving the file),
 * pre-norm layers with LayerNormalization, rotary position embedding driven by `position_ids`,
 * grouped-query attention with a KV cache, causal + padding mask from `attention_mask`, SwiGLU MLP.
 * Standard opset-17 operators only.
 */
export function makeDummyDecoder(options: DummyDecoderOptions): DummyDecoderResult {
  const layers = options.layers ?? 2;
  const hidden = options.hidden ?? 64;
  const heads = options.heads ?? 4;
  const kvHeads = options.kvHeads ?? 2;
  const intermediate = options.intermediate ?? hidden * 2;
  const seed = String(options.seed ?? 0);
  checkShape({ layers, hidden, heads, kvHeads, intermediate });
  const headDim = hidden / heads;

  const tokenizerFiles = resolveTokenizerFiles(options.tokenizer ?? 'qwen3');
  const vocabularySize = tokenizerVocabularySize(tokenizerFiles.tokenizer);
  const tokenId = (field: string): number | null =>
    specialTokenId(tokenizerFiles.tokenizer, specialTokenContent(tokenizerFiles.tokenizerConfig, field));

  const config: DummyDecoderConfig = {
    architectures: ['HatDummyDecoderForCausalLM'],
    model_type: 'hat_dummy_decoder',
    num_hidden_layers: layers,
    num_attention_heads: heads,
    num_key_value_heads: kvHeads,
    hidden_size: hidden,
    head_dim: headDim,
    intermediate_size: intermediate,
    vocab_size: vocabularySize,
    max_position_embeddings: 32768,
    rope_theta: ropeTheta,
    layer_norm_eps: layerNormEpsilon,
    tie_word_embeddings: true,
    torch_dtype: 'float32',
    eos_token_id: tokenId('eos_token'),
    pad_token_id: tokenId('pad_token'),
    bos_token_id: tokenId('bos_token'),
    hat_dummy_weights: true,
    hat_dummy_seed: seed,
    hat_dummy_tokenizer: tokenizerFiles.source,
  };

  const chunks = buildDummyGraph(config, new Rng(`hat-dummy-decoder/${seed}`), options.logitsToKeep ?? true).encode({
    opsetVersion,
    producerName: 'hat-pipeline',
    producerVersion: version,
    metadata: { hat_dummy_weights: 'true' },
  });

  const outDir = resolve(options.outDir);
  mkdirSync(outDir, { recursive: true });
  const hash = createHash('sha256');
  // Written under a temporary name and renamed, so a reader never sees half a model.
  const temporary = join(outDir, `.model.onnx.${process.pid}.tmp`);
  const handle = openSync(temporary, 'w');
  let modelBytes = 0;
  try {
    for (const chunk of chunks) {
      writeSync(handle, chunk);
      hash.update(chunk);
      modelBytes += chunk.length;
    }
  } finally {
    closeSync(handle);
  }
  renameSync(temporary, join(outDir, 'model.onnx'));
  writeFileSync(join(outDir, 'config.json'), jsonText(config));
  writeFileSync(join(outDir, 'tokenizer.json'), tokenizerFiles.text?.tokenizer ?? jsonText(tokenizerFiles.tokenizer));
  writeFileSync(
    join(outDir, 'tokenizer_config.json'),
    tokenizerFiles.text?.tokenizerConfig ?? jsonText(tokenizerFiles.tokenizerConfig),
  );
  return {
    outDir,
    config,
    files: ['model.onnx', 'config.json', 'tokenizer.json', 'tokenizer_config.json'],
    modelSha256: hash.digest('hex'),
    modelBytes,
  };
}

/** Whether a model directory holds a dummy (random-weight) model: config.json has `hat_dummy_weights: true`. */
export function isDummyModel(directory: string): boolean {
  const file = join(directory, 'config.json');
  if (!existsSync(file)) return false;
  try {
    return (JSON.parse(readFileSync(file, 'utf8')) as { hat_dummy_weights?: unknown }).hat_dummy_weights === true;
  } catch {
    return false;
  }
}

function jsonText(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}

function checkShape(shape: {
  layers: number;
  hidden: number;
  heads: number;
  kvHeads: number;
  intermediate: number;
}): void {
  for (const [name, value] of Object.entries(shape)) {
    if (!Number.isInteger(value) || value < 1)
      throw new BadInputError(
        'DUMMY_MODEL_SHAPE',
        `--${name === 'kvHeads' ? 'kv-heads' : name} must be a positive integer (got ${value})`,
      );
  }
  if (shape.hidden % shape.heads !== 0)
    throw new BadInputError(
      'DUMMY_MODEL_SHAPE',
      `--hidden ${shape.hidden} must be a multiple of --heads ${shape.heads}`,
    );
  if (shape.heads % shape.kvHeads !== 0)
    throw new BadInputError(
      'DUMMY_MODEL_SHAPE',
      `--heads ${shape.heads} must be a multiple of --kv-heads ${shape.kvHeads}`,
    );
  if ((shape.hidden / shape.heads) % 2 !== 0)
    throw new BadInputError(
      'DUMMY_MODEL_SHAPE',
      `head size --hidden / --heads = ${shape.hidden / shape.heads} must be even for rotary position embedding`,
    );
}

function specialTokenId(tokenizer: Record<string, unknown>, content: string | undefined): number | null {
  if (content === undefined) return null;
  const added = (tokenizer.added_tokens as Array<{ id: number; content: string }> | undefined)?.find(
    (entry) => entry.content === content,
  );
  if (added) return added.id;
  const vocab = (tokenizer.model as { vocab?: unknown } | undefined)?.vocab;
  return vocab && !Array.isArray(vocab) && typeof vocab === 'object'
    ? ((vocab as Record<string, number>)[content] ?? null)
    : null;
}

function normalWeights(rng: Rng, count: number, std: number): Float32Array {
  const values = new Float32Array(count);
  for (let index = 0; index < count; index++) values[index] = rng.normal(0, std);
  return values;
}

function buildDummyGraph(config: DummyDecoderConfig, rng: Rng, withLogitsToKeep: boolean): OnnxGraphBuilder {
  const {
    num_hidden_layers: layers,
    hidden_size: hidden,
    num_attention_heads: heads,
    num_key_value_heads: kvHeads,
    head_dim: headDim,
    intermediate_size: intermediate,
    vocab_size: vocabularySize,
  } = config;
  const group = heads / kvHeads;
  const graph = new OnnxGraphBuilder('hat_dummy_decoder');
  // Each tensor draws from its own stream, so changing one shape does not reshuffle the others.
  const matrix = (name: string, rows: number, columns: number, std = 1 / Math.sqrt(rows)): string =>
    graph.floatConstant(name, [rows, columns], normalWeights(rng.fork(name), rows * columns, std));
  const ones = (name: string, size: number): string =>
    graph.floatConstant(name, [size], new Float32Array(size).fill(1));
  const axes = (name: string, values: number[]): string => graph.int64Constant(name, [values.length], values);

  const inputIds = graph.input('input_ids', 'int64', ['batch_size', 'sequence_length']);
  const attentionMask = graph.input('attention_mask', 'int64', ['batch_size', 'total_sequence_length']);
  const positionIds = graph.input('position_ids', 'int64', ['batch_size', 'sequence_length']);
  // A required input, as every input of an Optimum export is (an initializer default would make
  // onnxruntime hide it from the input list and warn on every load); 0 feeds every position.
  const logitsToKeep = withLogitsToKeep
    ? graph.input(logitsToKeepInput, 'int64', [])
    : graph.int64Constant('keep_all', [], [0]);
  const past = Array.from({ length: layers }, (_, layer) => ({
    key: graph.input(`past_key_values.${layer}.key`, 'float', ['batch_size', kvHeads, 'past_sequence_length', headDim]),
    value: graph.input(`past_key_values.${layer}.value`, 'float', [
      'batch_size',
      kvHeads,
      'past_sequence_length',
      headDim,
    ]),
  }));

  // Logit spread ~2 (embedding std 2/sqrt(hidden) against unit-variance normed states) so the
  // random model's next-token distributions are peaked enough for sampling settings to matter.
  const embedding = matrix('model.embed_tokens.weight', vocabularySize, hidden, 2 / Math.sqrt(hidden));
  let hiddenStates = graph.op('Gather', [embedding, inputIds], { axis: 0 });

  // Rotary embedding: angle = position × inverse frequency, both halves of the head share one
  // frequency; rotate_half(x) is x @ R with a fixed signed permutation matrix R.
  const inverseFrequency = new Float32Array(headDim);
  for (let index = 0; index < headDim / 2; index++) {
    inverseFrequency[index] = inverseFrequency[index + headDim / 2] = 1 / Math.pow(ropeTheta, (2 * index) / headDim);
  }
  const rotateHalf = new Float32Array(headDim * headDim);
  for (let column = 0; column < headDim / 2; column++) {
    rotateHalf[(column + headDim / 2) * headDim + column] = -1;
    rotateHalf[column * headDim + column + headDim / 2] = 1;
  }
  const rotation = graph.floatConstant('rotary.rotate_half', [headDim, headDim], rotateHalf);
  const positions = graph.op('Unsqueeze', [graph.op('Cast', [positionIds], { to: 1 }), axes('axes_2', [2])]);
  const angles = graph.op('Mul', [positions, graph.floatConstant('rotary.inv_freq', [headDim], inverseFrequency)]);
  const cos = graph.op('Cos', [angles]);
  const sin = graph.op('Sin', [angles]);
  const cosKeys = graph.op('Unsqueeze', [cos, axes('axes_1', [1])]);
  const sinKeys = graph.op('Unsqueeze', [sin, axes('axes_1', [1])]);
  const cosQueries = graph.op('Unsqueeze', [cos, axes('axes_1_2', [1, 2])]);
  const sinQueries = graph.op('Unsqueeze', [sin, axes('axes_1_2', [1, 2])]);
  const rotary = (states: string, cosine: string, sine: string): string =>
    graph.op('Add', [
      graph.op('Mul', [states, cosine]),
      graph.op('Mul', [graph.op('MatMul', [states, rotation]), sine]),
    ]);

  // Mask [batch, 1, 1, query, key]: query i of this call sits at index past + i of the sequence
  // and sees keys at indices <= its own whose attention_mask is 1.
  const scalarIndex = (shapeOf: string): string =>
    graph.op('Gather', [graph.op('Shape', [shapeOf]), graph.int64Constant('index_1', [], [1])], { axis: 0 });
  const queryLength = scalarIndex(inputIds);
  const totalLength = scalarIndex(attentionMask);
  const zero = graph.int64Constant('zero', [], [0]);
  const one = graph.int64Constant('one', [], [1]);
  const keyIndex = graph.op('Range', [zero, totalLength, one]);
  const queryIndex = graph.op('Range', [graph.op('Sub', [totalLength, queryLength]), totalLength, one]);
  const causal = graph.op('LessOrEqual', [keyIndex, graph.op('Unsqueeze', [queryIndex, axes('axes_1', [1])])]);
  const keyAllowed = graph.op('Unsqueeze', [graph.op('Cast', [attentionMask], { to: 9 }), axes('axes_1_2', [1, 2])]);
  const allowed = graph.op('Unsqueeze', [graph.op('And', [causal, keyAllowed]), axes('axes_1', [1])]);
  const maskBias = graph.op('Where', [
    allowed,
    graph.floatConstant('mask.open', [], [0]),
    graph.floatConstant('mask.closed', [], [-1e9]),
  ]);
  const attentionScale = graph.floatConstant('attention.scale', [], [1 / Math.sqrt(headDim)]);

  for (let layer = 0; layer < layers; layer++) {
    const prefix = `model.layers.${layer}`;
    const normed = graph.op('LayerNormalization', [hiddenStates, ones(`${prefix}.input_layernorm.weight`, hidden)], {
      axis: -1,
      epsilon: floatAttribute(layerNormEpsilon),
    });
    // Queries as [batch, kv_head, group, seq, head_dim]: query head h uses kv head floor(h / group),
    // the same pairing as Hugging Face's repeat_kv, with no copy of K/V.
    const queries = graph.op(
      'Transpose',
      [
        graph.op('Reshape', [
          graph.op('MatMul', [normed, matrix(`${prefix}.self_attn.q_proj.weight`, hidden, heads * headDim)]),
          graph.int64Constant('shape_q', [5], [0, 0, kvHeads, group, headDim]),
        ]),
      ],
      { perm: [0, 2, 3, 1, 4] },
    );
    const splitHeads = (projection: string): string =>
      graph.op(
        'Transpose',
        [
          graph.op('Reshape', [
            graph.op('MatMul', [normed, matrix(`${prefix}.self_attn.${projection}.weight`, hidden, kvHeads * headDim)]),
            graph.int64Constant('shape_kv', [4], [0, 0, kvHeads, headDim]),
          ]),
        ],
        { perm: [0, 2, 1, 3] },
      );
    const keys = rotary(splitHeads('k_proj'), cosKeys, sinKeys);
    const values = splitHeads('v_proj');
    const presentKey = graph.op('Concat', [past[layer].key, keys], { axis: 2 }, `present.${layer}.key`);
    const presentValue = graph.op('Concat', [past[layer].value, values], { axis: 2 }, `present.${layer}.value`);
    graph.output(presentKey, presentKey, 'float', ['batch_size', kvHeads, 'total_sequence_length', headDim]);
    graph.output(presentValue, presentValue, 'float', ['batch_size', kvHeads, 'total_sequence_length', headDim]);

    const keysTransposed = graph.op('Transpose', [graph.op('Unsqueeze', [presentKey, axes('axes_2', [2])])], {
      perm: [0, 1, 2, 4, 3],
    });
    const scores = graph.op('Add', [
      graph.op('Mul', [graph.op('MatMul', [rotary(queries, cosQueries, sinQueries), keysTransposed]), attentionScale]),
      maskBias,
    ]);
    const context = graph.op('MatMul', [
      graph.op('Softmax', [scores], { axis: -1 }),
      graph.op('Unsqueeze', [presentValue, axes('axes_2', [2])]),
    ]);
    const merged = graph.op('Reshape', [
      graph.op('Transpose', [context], { perm: [0, 3, 1, 2, 4] }),
      graph.int64Constant('shape_merge', [3], [0, 0, -1]),
    ]);
    hiddenStates = graph.op('Add', [
      hiddenStates,
      graph.op('MatMul', [merged, matrix(`${prefix}.self_attn.o_proj.weight`, heads * headDim, hidden)]),
    ]);

    const mlpInput = graph.op(
      'LayerNormalization',
      [hiddenStates, ones(`${prefix}.post_attention_layernorm.weight`, hidden)],
      { axis: -1, epsilon: floatAttribute(layerNormEpsilon) },
    );
    const gate = graph.op('MatMul', [mlpInput, matrix(`${prefix}.mlp.gate_proj.weight`, hidden, intermediate)]);
    const up = graph.op('MatMul', [mlpInput, matrix(`${prefix}.mlp.up_proj.weight`, hidden, intermediate)]);
    const activated = graph.op('Mul', [graph.op('Mul', [gate, graph.op('Sigmoid', [gate])]), up]);
    hiddenStates = graph.op('Add', [
      hiddenStates,
      graph.op('MatMul', [activated, matrix(`${prefix}.mlp.down_proj.weight`, intermediate, hidden)]),
    ]);
  }

  // Only the last `logits_to_keep` positions reach the LM head (transformers' semantics: 0 keeps
  // all). A prefill needs one row, scoring the completion's rows: the [positions × vocabulary]
  // head is most of a small decoder's prefill cost (760 M floats for 5,000 Qwen3 tokens).
  const keepStart = graph.op('Unsqueeze', [graph.op('Neg', [logitsToKeep]), axes('axes_0', [0])]);
  const keptStates = graph.op('Slice', [
    hiddenStates,
    keepStart,
    graph.int64Constant('slice_end', [1], [Number.MAX_SAFE_INTEGER]),
    axes('axes_1', [1]),
  ]);
  const finalNormed = graph.op('LayerNormalization', [keptStates, ones('model.norm.weight', hidden)], {
    axis: -1,
    epsilon: floatAttribute(layerNormEpsilon),
  });
  // LM head tied to the embedding: Gemm with transB reads the [vocab, hidden] matrix as is.
  const flatLogits = graph.op(
    'Gemm',
    [graph.op('Reshape', [finalNormed, graph.int64Constant('shape_flat', [2], [-1, hidden])]), embedding],
    { transB: 1 },
  );
  const logitsShape = graph.op(
    'Concat',
    [graph.op('Shape', [keptStates], { end: 2 }), graph.int64Constant('vocab_dim', [1], [vocabularySize])],
    { axis: 0 },
  );
  graph.output(graph.op('Reshape', [flatLogits, logitsShape]), 'logits', 'float', [
    'batch_size',
    'kept_length',
    vocabularySize,
  ]);
  return graph;
}
