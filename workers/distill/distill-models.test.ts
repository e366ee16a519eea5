import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTokenScorer } from '../../shared/models/model-registry';
import { checkLogprobTemperature, ensureDummyModel, resolveLogprobTemperature } from './distill-models';

let directory: string;

beforeAll(() => {
  directory = mkdtempSync(join(tmpdir(), 'hat-distill-models-'));
});

afterAll(() => rmSync(directory, { recursive: true, force: true }));

const shape = { tokenizer: 'bytes', layers: 1, hidden: 8, heads: 2, kvHeads: 1, seed: 'x' };

describe('distill models', () => {
  it('makes a dummy model once per shape, in a directory named after it, leaving no temporary files', () => {
    const first = ensureDummyModel(directory, shape);
    const again = ensureDummyModel(directory, shape);
    const other = ensureDummyModel(directory, { ...shape, seed: 'y' });
    expect(again).toBe(first);
    expect(other).not.toBe(first);
    expect(first).toMatch(/dummy-bytes-l1-h8-[0-9a-f]{10}$/);
    expect(JSON.parse(readFileSync(join(first, 'config.json'), 'utf8'))).toMatchObject({
      hat_dummy_weights: true,
      hat_dummy_seed: 'x',
      hidden_size: 8,
    });
    expect(existsSync(join(first, 'model.onnx'))).toBe(true);
    expect(readdirSync(directory).filter((name) => name.includes('.tmp-'))).toEqual([]);
  });

  it('puts both sides at the sampling temperature unless told otherwise, and keeps server teachers at 1', () => {
    expect(resolveLogprobTemperature({ sampling: { temperature: 0.7, topP: 1, topK: 0, maxNewTokens: 8 } })).toBe(0.7);
    expect(resolveLogprobTemperature({ sampling: { temperature: 0, topP: 1, topK: 0, maxNewTokens: 8 } })).toBe(1);
    expect(
      resolveLogprobTemperature({
        sampling: { temperature: 0.7, topP: 1, topK: 0, maxNewTokens: 8 },
        logprobTemperature: 1,
      }),
    ).toBe(1);
    // What the teacher's adapter builds says whether it scores at one temperature only.
    const server = createTokenScorer({ adapter: 'sglang', baseUrl: 'http://t:30000', model: 't' });
    expect(() => checkLogprobTemperature(server, 1)).not.toThrow();
    expect(() => checkLogprobTemperature(server, 0.7)).toThrow(
      /\[LOGPROB_TEMPERATURE_MISMATCH\] distill: the sglang teacher scores at temperature 1 only/,
    );
    const inProcess = createTokenScorer({ adapter: 'onnx', modelDir: ensureDummyModel(directory, shape) });
    expect(() => checkLogprobTemperature(inProcess, 0.7)).not.toThrow();
  });
});
