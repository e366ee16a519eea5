import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { z } from 'zod';
import { BadInputError } from '../shared/errors';
import { ensureDummyModel, type DummyModelOptions } from '../shared/models/onnx/ensure-dummy-model';
import { OnnxModelClient, type LoadedOnnxModel } from '../shared/models/onnx/onnx-model-client';
import { readJsonObject } from '../shared/models/onnx/tokenizer-source';
import type { ChatTemplateSource } from '../shared/text/chat-template';

/**
 * What `hat serve` serves: an ONNX model directory (Optimum decoder layout), or `dummy:` for a
 * generated random-weight decoder. Dummy specs read `dummy`, `dummy:<tokenizer>` or
 * `dummy:<tokenizer>?layers=2&hidden=64&heads=4&kvHeads=2&seed=dummy` (tokenizer: qwen3,
 * deepseek_v3, llama3_1, bytes or a directory), the shape fields of the `onnx` adapter's `dummy`.
 */
export interface ServeModelSpec {
  modelDir: string;
  /** The spec as given (for logs and `/v1/models` `root`). */
  spec: string;
}

const dummyQuerySchema = z
  .object({
    layers: z.coerce.number().int().min(1).max(48).default(2),
    hidden: z.coerce.number().int().min(4).max(4096).default(64),
    heads: z.coerce.number().int().min(1).max(64).default(4),
    kvHeads: z.coerce.number().int().min(1).max(64).default(2),
    seed: z.string().min(1).default('dummy'),
  })
  .strict();

/** Resolves a model spec to a model directory, generating a dummy model (once, under `cacheDir`) for `dummy:` specs. */
export function resolveServeModel(spec: string, cacheDir = '.hat/models'): ServeModelSpec {
  if (spec === 'dummy' || spec.startsWith('dummy:')) {
    const [tokenizerPart, query = ''] = spec.slice('dummy'.length).replace(/^:/, '').split('?', 2);
    const parsed = dummyQuerySchema.safeParse(Object.fromEntries(new URLSearchParams(query)));
    if (!parsed.success) {
      const problem = parsed.error.issues
        .map((issue) => `${issue.path.join('.') || 'query'}: ${issue.message}`)
        .join('; ');
      throw new BadInputError(
        'SERVE_MODEL_SPEC',
        `model spec "${spec}" is not a valid dummy spec (${problem}); write dummy:<tokenizer>?layers=2&hidden=64&heads=4&kvHeads=2&seed=s`,
      );
    }
    const options: DummyModelOptions = { tokenizer: tokenizerPart || 'qwen3', ...parsed.data };
    return { modelDir: ensureDummyModel(cacheDir, options), spec };
  }
  const modelDir = resolve(spec);
  if (!existsSync(modelDir)) {
    throw new BadInputError(
      'SERVE_MODEL_SPEC',
      `model "${spec}" is neither a directory nor a dummy: spec; pass an Optimum ONNX export directory or dummy:qwen3`,
    );
  }
  return { modelDir, spec };
}

/** The longest sequence the model takes: config.json `max_position_embeddings` (vLLM's default `max_model_len`). */
export function maxModelLengthOf(modelDir: string): number | null {
  try {
    const config = JSON.parse(readFileSync(join(modelDir, 'config.json'), 'utf8')) as {
      max_position_embeddings?: unknown;
    };
    return typeof config.max_position_embeddings === 'number' ? config.max_position_embeddings : null;
  } catch {
    return null;
  }
}

/** A served model: the client (for its load/close) and what it loaded. */
export interface ServedModel {
  client: OnnxModelClient;
  model: LoadedOnnxModel;
  modelId: string;
  modelDir: string;
  maxModelLength: number | null;
  /** The chat template's text (tool-call format detection). */
  chatTemplateText: string;
  /** The chat template as stored (one text, or named texts), for renders with template kwargs. */
  chatTemplateSource: ChatTemplateSource;
  tokenizerConfig: Record<string, unknown>;
  /** Sampling defaults from generation_config.json, used for fields a request leaves out (as vLLM's `--generation-config auto`). */
  samplingDefaults: SamplingDefaults;
}

export interface SamplingDefaults {
  temperature?: number;
  topP?: number;
  topK?: number;
}

/** generation_config.json's temperature, top_p and top_k, when the model directory has one. */
export function samplingDefaultsOf(modelDir: string): SamplingDefaults {
  const file = join(modelDir, 'generation_config.json');
  if (!existsSync(file)) return {};
  const config = readJsonObject(file);
  const number = (field: string): number | undefined => (typeof config[field] === 'number' ? config[field] : undefined);
  const defaults: SamplingDefaults = {};
  if (number('temperature') !== undefined) defaults.temperature = number('temperature');
  if (number('top_p') !== undefined) defaults.topP = number('top_p');
  if (number('top_k') !== undefined) defaults.topK = number('top_k');
  return defaults;
}

/** Loads a model directory for serving. */
export async function loadServedModel(
  modelDir: string,
  options: { modelId?: string; intraOpThreads?: number } = {},
): Promise<ServedModel> {
  const client = new OnnxModelClient({ modelDir, modelId: options.modelId, intraOpThreads: options.intraOpThreads });
  const model = await client.load();
  const tokenizerConfig = readJsonObject(join(modelDir, 'tokenizer_config.json'));
  return {
    client,
    model,
    modelId: client.modelId,
    modelDir: resolve(modelDir),
    maxModelLength: maxModelLengthOf(modelDir),
    chatTemplateText: chatTemplateTextOf(modelDir, tokenizerConfig),
    chatTemplateSource: chatTemplateSourceOf(modelDir, tokenizerConfig),
    tokenizerConfig,
    samplingDefaults: samplingDefaultsOf(modelDir),
  };
}

function chatTemplateSourceOf(modelDir: string, tokenizerConfig: Record<string, unknown>): ChatTemplateSource {
  const file = join(modelDir, 'chat_template.jinja');
  if (existsSync(file)) return readFileSync(file, 'utf8');
  const template = tokenizerConfig.chat_template;
  if (Array.isArray(template))
    return template.filter(
      (entry: { name?: unknown; template?: unknown }) =>
        typeof entry?.name === 'string' && typeof entry.template === 'string',
    ) as ChatTemplateSource;
  return typeof template === 'string' ? template : '';
}

/** The template text the renderer uses (chat_template.jinja beside the model, else tokenizer_config.json's), '' when none. */
function chatTemplateTextOf(modelDir: string, tokenizerConfig: Record<string, unknown>): string {
  const file = join(modelDir, 'chat_template.jinja');
  if (existsSync(file)) return readFileSync(file, 'utf8');
  const template = tokenizerConfig.chat_template;
  if (typeof template === 'string') return template;
  if (Array.isArray(template))
    return template
      .map((entry: { template?: unknown }) => (typeof entry?.template === 'string' ? entry.template : ''))
      .join('\n');
  return '';
}
