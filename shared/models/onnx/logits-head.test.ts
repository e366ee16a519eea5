/** @jest-environment ./shared/models/onnx/onnx-jest-environment.js */
import { LogitsHead } from './logits-head';

/** log-softmax(x / temperature) in float64, the definition. */
function referenceLogSoftmax(row: number[], temperature: number): number[] {
  const scaled = row.map((value) => value / temperature);
  const max = Math.max(...scaled);
  const logNormalizer = max + Math.log(scaled.reduce((sum, value) => sum + Math.exp(value - max), 0));
  return scaled.map((value) => value - logNormalizer);
}

describe('LogitsHead', () => {
  it('gives log-softmax at the temperature, at temperature 1, and softmax probabilities, per row', async () => {
    const rows = [
      [2, 1, 0.5, -3, 4, 0],
      [0, 0, 0, 0, 0, 10],
    ];
    const head = await LogitsHead.create(6, 1);
    try {
      const outputs = await head.run(Float32Array.from(rows.flat()), 0.5, { probabilities: true });
      rows.forEach((row, index) => {
        const tempered = referenceLogSoftmax(row, 0.5);
        const raw = referenceLogSoftmax(row, 1);
        row.forEach((_, tokenId) => {
          expect(outputs.logprobs[index * 6 + tokenId]).toBeCloseTo(tempered[tokenId], 5);
          expect(outputs.rawLogprobs[index * 6 + tokenId]).toBeCloseTo(raw[tokenId], 5);
          expect(outputs.probabilities![index * 6 + tokenId]).toBeCloseTo(Math.exp(tempered[tokenId]), 6);
        });
      });
      const plain = await head.run(Float32Array.from(rows[0]), 1, { probabilities: false });
      expect(plain.logprobs).toBe(plain.rawLogprobs);
      expect(plain.probabilities).toBeUndefined();
      // Probabilities alone (sampling without logprobs) are the same ones, without the log-softmaxes.
      const only = await head.run(Float32Array.from(rows.flat()), 0.5, { probabilities: true, logprobs: false });
      expect(Array.from(only.probabilities!)).toEqual(Array.from(outputs.probabilities!));
      expect(only.logprobs).toHaveLength(0);
    } finally {
      await head.close();
    }
  });
});
