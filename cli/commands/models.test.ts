/** @jest-environment ./shared/models/onnx/onnx-jest-environment.js */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { CliContext } from '../cli-context';
import { runCli } from '../main';

let workDirectory: string;

async function hat(...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const output = { stdout: '', stderr: '' };
  stdout.on('data', (chunk: Buffer) => (output.stdout += chunk.toString()));
  stderr.on('data', (chunk: Buffer) => (output.stderr += chunk.toString()));
  const code = await runCli(argv, new CliContext(stdout, stderr, {}));
  return { code, ...output };
}

beforeAll(() => {
  workDirectory = mkdtempSync(join(tmpdir(), 'hat-models-cli-'));
});

afterAll(() => {
  rmSync(workDirectory, { recursive: true, force: true });
});

describe('hat models', () => {
  it('make-dummy writes a model directory and says its weights are random', async () => {
    const out = join(workDirectory, 'dummy');
    const result = await hat(
      'models',
      'make-dummy',
      '--out',
      out,
      '--tokenizer',
      'bytes',
      '--hidden',
      '16',
      '--layers',
      '1',
      '--seed',
      '3',
    );
    expect(result.code).toBe(0);
    for (const file of ['model.onnx', 'config.json', 'tokenizer.json', 'tokenizer_config.json'])
      expect(existsSync(join(out, file))).toBe(true);
    expect(result.stdout).toContain('random weights');
    expect(result.stdout).toContain('vocab 282');
    expect(JSON.parse(readFileSync(join(out, 'config.json'), 'utf8'))).toMatchObject({
      hat_dummy_weights: true,
      hidden_size: 16,
      num_hidden_layers: 1,
    });
  });

  it('info and chat load the model in-process', async () => {
    const out = join(workDirectory, 'chat');
    expect((await hat('models', 'make-dummy', '--out', out, '--tokenizer', 'bytes', '--hidden', '16')).code).toBe(0);
    const info = await hat('models', 'info', out, '--json');
    expect(info.code).toBe(0);
    expect(JSON.parse(info.stdout)).toMatchObject({ dummyWeights: true, layers: 2, vocabularySize: 282 });
    const chat = await hat('models', 'chat', out, '--message', 'Hello', '--max-tokens', '5', '--seed', '1', '--json');
    expect(chat.code).toBe(0);
    const response = JSON.parse(chat.stdout) as {
      usage: { completionTokens: number };
      logprobs: unknown[];
      dummyWeights: boolean;
    };
    expect(response.usage.completionTokens).toBeLessThanOrEqual(5);
    expect(response.logprobs).toHaveLength(response.usage.completionTokens);
    expect(response.dummyWeights).toBe(true);
  });

  it('exits 2 with the flag named on bad input', async () => {
    const badShape = await hat(
      'models',
      'make-dummy',
      '--out',
      join(workDirectory, 'bad'),
      '--tokenizer',
      'bytes',
      '--hidden',
      '30',
    );
    expect(badShape.code).toBe(2);
    expect(badShape.stderr).toContain('[DUMMY_MODEL_SHAPE] --hidden 30 must be a multiple of --heads 4');
    const notANumber = await hat('models', 'make-dummy', '--out', join(workDirectory, 'bad'), '--layers', 'two');
    expect(notANumber.code).toBe(2);
    expect(notANumber.stderr).toContain('--layers takes a positive integer (got "two")');
    const missing = await hat('models', 'info', join(workDirectory, 'nothing-here'));
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('[ONNX_MODEL_MISSING]');
  });
});
