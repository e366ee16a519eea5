import type { DistillModelsSummary, SourceTotals } from './distill-contract';
import { buildRolloutRecord, type RolloutParts } from './rollout-records';
import { addRecord, buildStats, emptyTotals } from './rollout-stats';

function parts(overrides: Partial<RolloutParts>): RolloutParts {
  return {
    source: 'a',
    promptId: 'p',
    sampleIndex: 0,
    seed: 's',
    promptIds: [1, 2, 3],
    responseIds: [4, 5],
    finishReason: 'stop',
    studentLogprobs: [-0.5, -1],
    teacher: { logprobs: [-1, -1] },
    teacherTopK: 0,
    responseText: 'xy',
    studentLogprobTemperature: 1,
    teacherLogprobTemperature: 1,
    tokenizerFingerprint: 'f',
    studentModel: 'student',
    teacherModel: 'teacher',
    policyVersion: 1,
    studentEngine: 'onnx',
    dummyWeights: false,
    ...overrides,
  };
}

const models: DistillModelsSummary = {
  student: { engine: 'onnx', modelId: 'student', location: '/m/s', dummyWeights: false, logprobTemperature: 1 },
  teacher: {
    engine: 'vllm',
    modelId: 'teacher',
    location: 'http://t/v1/completions',
    dummyWeights: true,
    logprobTemperature: 1,
  },
  tokenizer: { fingerprint: 'f', templateHash: 't', verifiedBy: ['probe'], probedTokens: 40 },
};

describe('rollout records and stats', () => {
  it('stores float32 logprobs, the per-token reverse KL and a padded row-major top-k', () => {
    const record = buildRolloutRecord(
      parts({
        studentLogprobs: [-0.1, -0.2],
        teacher: {
          logprobs: [-0.3, -0.7],
          top: [
            [
              { tokenId: 9, logprob: -0.3 },
              { tokenId: 4, logprob: -1.1 },
            ],
            [{ tokenId: 5, logprob: -0.7 }],
          ],
        },
        teacherTopK: 2,
      }),
    );
    expect(record.rollout_log_probs).toEqual([Math.fround(-0.1), Math.fround(-0.2)]);
    expect(record.reverse_kl).toEqual([
      Math.fround(Math.fround(-0.1) - Math.fround(-0.3)),
      Math.fround(Math.fround(-0.2) - Math.fround(-0.7)),
    ]);
    expect(record.loss_mask).toEqual([1, 1]);
    expect(record.teacher_top_ids).toEqual([9, 4, 5, -1]);
    expect(record.teacher_top_log_probs).toEqual([
      Math.fround(-0.3),
      Math.fround(-1.1),
      Math.fround(-0.7),
      Math.fround(-1e30),
    ]);
    expect(record.dummy_weights).toBe(false);
    expect(buildRolloutRecord(parts({ dummyWeights: true })).dummy_weights).toBe(true);
    expect(() => buildRolloutRecord(parts({ teacher: { logprobs: [-1] } }))).toThrow(
      /2 response tokens but 2 student and 1 teacher logprobs/,
    );
  });

  it('weights the mean KL by tokens and keeps the per-sequence mean apart, per source and overall', () => {
    const first: Record<string, SourceTotals> = { a: emptyTotals() };
    // KL 0.5 over 2 tokens, then 0 over 6 tokens from another sample of the same prompt.
    addRecord(first.a, buildRolloutRecord(parts({ studentLogprobs: [-0.5, -0.5], teacher: { logprobs: [-1, -1] } })));
    addRecord(
      first.a,
      buildRolloutRecord(
        parts({
          sampleIndex: 1,
          responseIds: [1, 1, 1, 1, 1, 1],
          studentLogprobs: new Array(6).fill(-1),
          teacher: { logprobs: new Array(6).fill(-1) },
          finishReason: 'length',
        }),
      ),
    );
    const second: Record<string, SourceTotals> = { b: emptyTotals() };
    addRecord(
      second.b,
      buildRolloutRecord(parts({ source: 'b', studentLogprobs: [-0.25, -0.25], teacher: { logprobs: [-0.5, -0.5] } })),
    );
    const stats = buildStats([first, second], {
      models,
      sampling: { temperature: 1, topP: 1, topK: 0, maxNewTokens: 8, samplesPerPrompt: 2, seed: '0' },
      teacherTopK: 0,
    });
    expect(stats.dummyWeights).toBe(true);
    expect(Object.keys(stats.sources)).toEqual(['a', 'b']);
    expect(stats.sources.a).toMatchObject({
      prompts: 1,
      samples: 2,
      responseTokens: 8,
      meanReverseKl: 0.125,
      meanSequenceReverseKl: 0.25,
      meanResponseLength: 4,
      finishReasons: { stop: 1, length: 1 },
    });
    expect(stats.global).toMatchObject({
      prompts: 2,
      samples: 3,
      responseTokens: 10,
      meanReverseKl: 0.15,
      meanPromptLength: 3,
    });
    expect(stats.global.meanSequenceReverseKl).toBeCloseTo(0.25, 12);
  });
});
