import { InvalidArgumentError, type Command } from 'commander';
import type { CliContext } from '../cli-context';
import type { RegisterCommand } from './index';
import { nextShutdownSignal } from './worker';
import { logprobsModes, startServeServer, type LogprobsMode } from '../../serve';

interface ServeCommandOptions {
  host: string;
  port: number;
  servedModelName?: string;
  logprobsMode: LogprobsMode;
  maxLogprobs: number;
  maxBatchSize: number;
  toolCallParser: string;
  cacheDir: string;
  threads?: number;
  maxModelLen?: number;
  apiKey?: string;
}

function integerAtLeast(flag: string, minimum: number): (value: string) => number {
  return (value) => {
    const parsed = Number(value);
    if (!Number.isInteger(parsed) || parsed < minimum)
      throw new InvalidArgumentError(`${flag} takes an integer >= ${minimum} (got "${value}")`);
    return parsed;
  };
}

function logprobsMode(value: string): LogprobsMode {
  if (!(logprobsModes as readonly string[]).includes(value))
    throw new InvalidArgumentError(`--logprobs-mode takes ${logprobsModes.join(' or ')} (got "${value}")`);
  return value as LogprobsMode;
}

/** `hat serve <model>`: a vLLM-compatible HTTP server over an ONNX model directory or a dummy model; serves until SIGTERM/SIGINT. */
export const registerServeCommand: RegisterCommand = (program: Command, context: CliContext) => {
  program
    .command('serve')
    .description("serve an ONNX model (or a dummy) with the subset of vLLM's OpenAI-compatible API the pipeline uses")
    .argument(
      '<model>',
      'Optimum ONNX model directory, or dummy[:<tokenizer>][?layers=2&hidden=64&heads=4&kvHeads=2&seed=s]',
    )
    .option('--host <host>', 'address to listen on', '127.0.0.1')
    .option('--port <port>', 'port (0: a free one)', integerAtLeast('--port', 0), 8000)
    .option('--served-model-name <name>', 'model id clients send (default: the directory name)')
    .option(
      '--logprobs-mode <mode>',
      `which distribution logprobs are of: ${logprobsModes.join(', ')}`,
      logprobsMode,
      'raw_logprobs',
    )
    .option(
      '--max-logprobs <n>',
      'largest logprobs / prompt_logprobs a request may ask for',
      integerAtLeast('--max-logprobs', 0),
      20,
    )
    .option('--max-batch-size <n>', 'most requests decoded in one batch', integerAtLeast('--max-batch-size', 1), 8)
    .option('--tool-call-parser <name>', 'auto (from the chat template), hermes, qwen3_coder or llama3_json', 'auto')
    .option('--cache-dir <dir>', 'where dummy models are generated', '.hat/models')
    .option('--threads <n>', 'onnxruntime intra-op threads', integerAtLeast('--threads', 1))
    .option(
      '--max-model-len <n>',
      'longest prompt + completion (default: config.json max_position_embeddings)',
      integerAtLeast('--max-model-len', 1),
    )
    .option('--api-key <key>', '/v1/* requests must send Authorization: Bearer <key> (default: VLLM_API_KEY, as vLLM)')
    .action(async (model: string, options: ServeCommandOptions) => {
      const server = await startServeServer({
        model,
        host: options.host,
        port: options.port,
        servedModelName: options.servedModelName,
        logprobsMode: options.logprobsMode,
        maxLogprobs: options.maxLogprobs,
        maxBatchSize: options.maxBatchSize,
        toolCallParser: options.toolCallParser,
        cacheDir: options.cacheDir,
        intraOpThreads: options.threads,
        maxModelLength: options.maxModelLen,
        apiKey: options.apiKey ?? context.environment.VLLM_API_KEY,
      });
      const shutdown = nextShutdownSignal();
      context.print(`hat serve: ${server.baseUrl} model ${server.modelId} (${server.modelDir})`);
      context.print(
        `  logprobs mode ${server.logprobsMode}; tool-call parser ${server.toolCallParser ?? 'none (the template shows no known tool-call format)'}`,
      );
      if (server.dummyWeights)
        context.print('  random weights (dummy model): outputs are noise; use for tests, demos and benchmarks only');
      context.logger.info({ url: server.url, model: server.modelId, dummyWeights: server.dummyWeights }, 'serve ready');
      const signal = await shutdown;
      context.logger.info({ signal }, 'serve shutting down');
      await server.close();
    });
};
