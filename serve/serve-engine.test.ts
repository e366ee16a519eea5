import type { TokenScore } from '../shared/models/onnx/onnx-decoder';
import { minimumLogprob, processedNucleusLimit, servedToken } from './serve-engine';

/** A token score over a made-up distribution (probabilities at the sampling temperature, most likely first). */
function scoreOf(probabilities: number[], sampledIndex: number, rawLogprob: number): TokenScore {
  const top = probabilities.map((probability, tokenId) => ({ tokenId, logprob: Math.log(probability) }));
  return { tokenId: sampledIndex, logprob: Math.log(probabilities[sampledIndex]), rawLogprob, top };
}

describe('servedToken (logprobs in the server mode)', () => {
  const distribution = [0.5, 0.3, 0.15, 0.05];

  it('raw_logprobs: the sampled token at temperature 1, alternatives converted from the tempered ones', () => {
    // Logits z = [2, 1, 0]: at T = 2 the tempered logprobs are z/2 - logsumexp(z/2); raw ones z - logsumexp(z).
    const logits = [2, 1, 0];
    const logSumExp = (values: number[]): number => Math.log(values.reduce((sum, value) => sum + Math.exp(value), 0));
    const tempered = logits.map((z) => z / 2 - logSumExp(logits.map((value) => value / 2)));
    const raw = logits.map((z) => z - logSumExp(logits));
    const token: TokenScore = {
      tokenId: 1,
      logprob: tempered[1],
      rawLogprob: raw[1],
      top: tempered.map((logprob, tokenId) => ({ tokenId, logprob })),
    };
    const served = servedToken(token, 2, 'raw_logprobs', { topK: 0, topP: 1 }, 3);
    expect(served.logprob).toBe(raw[1]);
    served.top.forEach((entry, index) => expect(entry.logprob).toBeCloseTo(raw[index], 10));
  });

  it('processed_logprobs: top-k then top-p kept set, renormalized; tokens outside it at -9999', () => {
    const topK = servedToken(scoreOf(distribution, 1, -3), 1, 'processed_logprobs', { topK: 2, topP: 1 }, 4);
    expect(topK.logprob).toBeCloseTo(Math.log(0.3 / 0.8), 10);
    expect(topK.top.map((entry) => entry.logprob)).toEqual([
      expect.closeTo(Math.log(0.5 / 0.8), 10),
      expect.closeTo(Math.log(0.3 / 0.8), 10),
      minimumLogprob,
      minimumLogprob,
    ]);
    const topP = servedToken(scoreOf(distribution, 2, -3), 1, 'processed_logprobs', { topK: 0, topP: 0.9 }, 4);
    expect(topP.logprob).toBeCloseTo(Math.log(0.15 / 0.95), 10);
    expect(topP.top[3].logprob).toBe(minimumLogprob);
    // top_p within top_k: 0.6 of the top-2 mass (0.48) is reached by the first alone.
    const both = servedToken(scoreOf(distribution, 0, -3), 1, 'processed_logprobs', { topK: 2, topP: 0.6 }, 2);
    expect(both.logprob).toBeCloseTo(0, 10);
    expect(both.top[1].logprob).toBe(minimumLogprob);
  });

  it('refuses, for this token only, a nucleus larger than the alternatives tracked', () => {
    const flat = Array.from({ length: processedNucleusLimit }, () => 1 / (processedNucleusLimit * 2));
    expect(() => servedToken(scoreOf(flat, 0, -3), 1, 'processed_logprobs', { topK: 0, topP: 0.9 }, 1)).toThrow(
      /nucleus holds more than 1024 tokens/,
    );
  });
});
