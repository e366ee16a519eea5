import { HatError } from '../../errors';
import {
  checkDistillLogprobs,
  checkRolloutLogprobs,
  reportedDistribution,
  type EngineLogprobsMode,
  type LogprobSource,
} from './logprob-distribution';
import { sglangSamplingApi, vllmSamplingApi, type TokenSamplingApi } from './served-token-sampler';

/** A served sampler as the checks see it, with its server's default mode and hints. */
function served(engine: 'vllm' | 'sglang', logprobsMode: EngineLogprobsMode): LogprobSource {
  const api: TokenSamplingApi = { vllm: vllmSamplingApi, sglang: sglangSamplingApi }[engine];
  return {
    engine,
    logprobsMode,
    defaultLogprobsMode: api.defaultLogprobsMode,
    ...(api.processedLogprobsHint ? { processedLogprobsHint: api.processedLogprobsHint } : {}),
  };
}

function refusal(run: () => unknown): { code: string; exitCode: number; message: string } {
  try {
    run();
  } catch (error) {
    if (HatError.isInstance(error)) return { code: error.code, exitCode: error.exitCode, message: error.message };
    throw error;
  }
  throw new Error('expected a refusal');
}

describe('logprob distributions', () => {
  it('label what each engine reports', () => {
    expect(reportedDistribution('vllm', 'raw_logprobs', { temperature: 0.7, topP: 0.9, topK: 0 })).toEqual({
      kind: 'raw',
      temperature: 1,
      topP: 1,
      topK: 0,
      engine: 'vllm',
    });
    expect(reportedDistribution('vllm', 'processed_logprobs', { temperature: 0.7, topP: 0.9, topK: 20 })).toEqual({
      kind: 'processed',
      temperature: 0.7,
      topP: 0.9,
      topK: 20,
      engine: 'vllm',
    });
    expect(reportedDistribution('sglang', 'tempered_logprobs', { temperature: 0.7, topP: 1, topK: 0 })).toEqual({
      kind: 'tempered',
      temperature: 0.7,
      topP: 1,
      topK: 0,
      engine: 'sglang',
    });
    // Greedy rows are raw everywhere.
    expect(reportedDistribution('sglang', 'tempered_logprobs', { temperature: 0, topP: 1, topK: 0 }).kind).toBe('raw');
  });

  it('rl: accepts logprobs of the distribution tokens are drawn from', () => {
    expect(
      checkRolloutLogprobs('rl.policy', served('vllm', 'raw_logprobs'), { temperature: 1, topP: 1, topK: 0 }).kind,
    ).toBe('raw');
    expect(
      checkRolloutLogprobs('rl.policy', served('vllm', 'processed_logprobs'), {
        temperature: 0.6,
        topP: 0.95,
        topK: 20,
      }).kind,
    ).toBe('processed');
    expect(
      checkRolloutLogprobs('rl.policy', served('sglang', 'tempered_logprobs'), { temperature: 0.6, topP: 1, topK: 0 })
        .kind,
    ).toBe('tempered');
  });

  it('rl: refuses, exit 2, vLLM raw logprobs at temperature 0.7 and SGLang tempered logprobs under top-p', () => {
    const vllm = refusal(() =>
      checkRolloutLogprobs('rl.policy', served('vllm', 'raw_logprobs'), { temperature: 0.7, topP: 1, topK: 0 }),
    );
    expect(vllm).toMatchObject({ code: 'LOGPROB_DISTRIBUTION_MISMATCH', exitCode: 2 });
    expect(vllm.message).toContain('--logprobs-mode processed_logprobs');
    const sglang = refusal(() =>
      checkRolloutLogprobs('rl.policy', served('sglang', 'tempered_logprobs'), { temperature: 1, topP: 0.9, topK: 0 }),
    );
    expect(sglang).toMatchObject({ code: 'LOGPROB_DISTRIBUTION_MISMATCH', exitCode: 2 });
    expect(sglang.message).toContain('top-p 0.9');
  });

  it("distill: the student's logprobs must be at the KL temperature over the whole vocabulary", () => {
    expect(
      checkDistillLogprobs('student', served('vllm', 'raw_logprobs'), { temperature: 0.7, topP: 1, topK: 0 }, 1).kind,
    ).toBe('raw');
    expect(
      checkDistillLogprobs(
        'student',
        served('sglang', 'tempered_logprobs'),
        { temperature: 0.7, topP: 1, topK: 0 },
        0.7,
      ).kind,
    ).toBe('tempered');
    expect(
      refusal(() =>
        checkDistillLogprobs('student', served('vllm', 'raw_logprobs'), { temperature: 0.7, topP: 1, topK: 0 }, 0.7),
      ).message,
    ).toContain('logprobTemperature: 1');
    // Truncated (processed) logprobs are not comparable with the teacher's full-vocabulary ones.
    expect(
      refusal(() =>
        checkDistillLogprobs(
          'student',
          served('vllm', 'processed_logprobs'),
          { temperature: 1, topP: 0.9, topK: 0 },
          1,
        ),
      ).code,
    ).toBe('LOGPROB_DISTRIBUTION_MISMATCH');
  });
});
