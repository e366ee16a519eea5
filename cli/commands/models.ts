import { InvalidArgumentError, type Command } from 'commander';
import type { CliContext } from '../cli-context';
import type { RegisterCommand } from './index';
import { makeDummyDecoder } from '../../shared/models/onnx/dummy-decoder';
import { OnnxModelClient } from '../../shared/models/onnx/onnx-model-client';
import { tokenizerSourceNames } from '../../shared/models/onnx/tokenizer-source';

/** A subcommand of `hat models`, registered on the `models` command. */
type RegisterModelsSubcommand = (models: Command, context: CliContext) => void;

function positiveInteger(flag: string): (value: string) => number {
  return (value) => {
    const parsed = Number(value);
    if (!Number.isInteger(parsed) || parsed < 1)
      throw new InvalidArgumentError(`${flag} takes a positive integer (got "${value}")`);
    return parsed;
  };
}

function finiteNumber(flag: string): (value: string) => number {
  return (value) => {
    const parsed = Number(value);
    if (!Number.isFinite(parsed)) throw new InvalidArgumentError(`${flag} takes a number (got "${value}")`);
    return parsed;
  };
}

const randomWeightsNotice =
  'random weights (config.json hat_dummy_weights: true): outputs are noise; use for tests, demos and benchmarks only';

const registerMakeDummy: RegisterModelsSubcommand = (models, context) => {
  models
    .command('make-dummy')
    .description("write a small random-weight decoder-only ONNX model (Optimum layout) for a tokenizer's vocabulary")
    .requiredOption('--out <dir>', 'model directory to write')
    .option(
      '--tokenizer <name|dir>',
      `${tokenizerSourceNames.join(', ')} or a directory with tokenizer.json and tokenizer_config.json`,
      'qwen3',
    )
    .option('--layers <n>', 'decoder layers', positiveInteger('--layers'), 2)
    .option('--hidden <n>', 'hidden size', positiveInteger('--hidden'), 64)
    .option('--heads <n>', 'attention heads', positiveInteger('--heads'), 4)
    .option('--kv-heads <n>', 'key/value heads (divides --heads)', positiveInteger('--kv-heads'), 2)
    .option('--intermediate <n>', 'MLP inner size (default 2 x hidden)', positiveInteger('--intermediate'))
    .option('--seed <seed>', 'weight seed (same seed and shape: byte-identical model.onnx)', '0')
    .option('--json', 'print the result as JSON')
    .action(
      (options: {
        out: string;
        tokenizer: string;
        layers: number;
        hidden: number;
        heads: number;
        kvHeads: number;
        intermediate?: number;
        seed: string;
        json?: boolean;
      }) => {
        const result = makeDummyDecoder({
          outDir: options.out,
          tokenizer: options.tokenizer,
          layers: options.layers,
          hidden: options.hidden,
          heads: options.heads,
          kvHeads: options.kvHeads,
          intermediate: options.intermediate,
          seed: options.seed,
        });
        if (options.json) return context.printJson({ ...result, dummyWeights: true });
        const { config } = result;
        context.print(`wrote ${result.outDir}`);
        context.print(`  files:     ${result.files.join(', ')}`);
        context.print(
          `  model:     ${config.num_hidden_layers} layers, hidden ${config.hidden_size}, heads ${config.num_attention_heads}/${config.num_key_value_heads} kv, vocab ${config.vocab_size}`,
        );
        context.print(`  tokenizer: ${config.hat_dummy_tokenizer}`);
        context.print(`  model.onnx ${(result.modelBytes / 1e6).toFixed(1)} MB, sha256 ${result.modelSha256}`);
        context.print(`  ${randomWeightsNotice}`);
      },
    );
};

const registerInfo: RegisterModelsSubcommand = (models, context) => {
  models
    .command('info')
    .description('load an ONNX model directory, check its inputs and outputs, and describe it')
    .argument('<dir>', 'model directory (model.onnx, config.json, tokenizer.json, tokenizer_config.json)')
    .option('--json', 'print as JSON')
    .action(async (directory: string, options: { json?: boolean }) => {
      const client = new OnnxModelClient({ modelDir: directory });
      try {
        const info = await client.info();
        if (options.json) return context.printJson(info);
        context.print(`model ${client.modelId}: ok (${info.modelFile})`);
        context.print(
          `  type:      ${info.modelType}, ${info.layers} layers, ${info.keyValueHeads} kv heads of ${info.headDim}, vocab ${info.vocabularySize}`,
        );
        context.print(`  eos ids:   ${info.eosTokenIds.join(', ')}`);
        context.print(`  tokenizer: sha256 ${info.tokenizerFingerprint}`);
        if (info.dummyWeights) context.print(`  ${randomWeightsNotice}`);
      } finally {
        await client.close();
      }
    });
};

const registerChat: RegisterModelsSubcommand = (models, context) => {
  models
    .command('chat')
    .description('send one user message to an ONNX model directory in-process and print the reply')
    .argument('<dir>', 'model directory')
    .requiredOption('--message <text>', 'the user message')
    .option('--system <text>', 'a system message before it')
    .option('--max-tokens <n>', 'most tokens to generate', positiveInteger('--max-tokens'), 64)
    .option('--temperature <t>', 'sampling temperature (0 = greedy)', finiteNumber('--temperature'), 1)
    .option('--top-p <p>', 'nucleus mass', finiteNumber('--top-p'), 1)
    .option('--top-k <k>', 'keep the k most likely tokens (0 = off)', finiteNumber('--top-k'), 0)
    .option('--seed <n>', 'sampling seed', finiteNumber('--seed'), 0)
    .option('--json', 'print the whole response (timings, usage, logprobs) as JSON')
    .action(
      async (
        directory: string,
        options: {
          message: string;
          system?: string;
          maxTokens: number;
          temperature: number;
          topP: number;
          topK: number;
          seed: number;
          json?: boolean;
        },
      ) => {
        const client = new OnnxModelClient({ modelDir: directory });
        try {
          const response = await client.chat({
            messages: [
              ...(options.system ? [{ role: 'system' as const, content: options.system }] : []),
              { role: 'user', content: options.message },
            ],
            maxTokens: options.maxTokens,
            temperature: options.temperature,
            topP: options.topP,
            topK: options.topK,
            seed: options.seed,
            logprobs: options.json,
          });
          const info = await client.info();
          if (options.json) return context.printJson({ ...response, dummyWeights: info.dummyWeights });
          context.print(response.message.content ?? '');
          context.stderr.write(
            `[${response.usage.promptTokens} prompt + ${response.usage.completionTokens} completion tokens, ttft ${response.timings.ttftMs.toFixed(1)} ms, e2e ${response.timings.e2eMs.toFixed(1)} ms, finish ${response.finishReason}]\n`,
          );
          if (info.dummyWeights) context.stderr.write(`[${randomWeightsNotice}]\n`);
        } finally {
          await client.close();
        }
      },
    );
};

/** `hat models make-dummy | info | chat`: in-process ONNX models. */
export const registerModelsCommand: RegisterCommand = (program, context) => {
  const models = program.command('models').description('in-process ONNX decoder models: make a dummy, inspect, chat');
  for (const register of [registerMakeDummy, registerInfo, registerChat]) register(models, context);
};
