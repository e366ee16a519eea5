import type { StageDeps } from '../../queues/stage-kit/define-stage';
import { loadTokenizerSource } from '../../queues/stage-kit/load-tokenizer-source';
import { BadInputError } from '../../shared/errors';
import { hashValue } from '../../shared/hash/hash';
import type { Logger } from '../../shared/log/logger';
import { createTokenSampler, createTokenScorer } from '../../shared/models/model-registry';
import { InProcessModels } from '../../shared/models/onnx/in-process-token-models';
import type { OnnxTokenScorer } from '../../shared/models/scoring/onnx-token-scorer';
import { logprobTemperatureOf } from '../../shared/models/onnx/token-sampler';
import { checkTokenizerAgreement, type TokenizerAgreement } from '../../shared/models/scoring/tokenizer-agreement';
import type { TokenScorer } from '../../shared/models/scoring/token-scorer';
import { checkDistillLogprobs, type LogprobDistribution } from '../../shared/models/token-exact/logprob-distribution';
import { checkSamplerTokenizer } from '../../shared/models/token-exact/sampler-tokenizer-check';
import type { TokenSampler } from '../../shared/models/token-exact/token-sampler';
import type { ChatTokenizer } from '../../shared/text/chat-tokenizer';
import type { DistillInput, DistillSampling, StudentModelConfig, TeacherModelConfig } from './distill-contract';

export { ensureDummyModel, type DummyModelOptions } from '../../shared/models/onnx/ensure-dummy-model';
import { ensureDummyModel } from '../../shared/models/onnx/ensure-dummy-model';

/** The two models of the demo: a small student and a larger teacher, random weights, Qwen3's tokenizer (so their fingerprints agree). */
export const demoDistillModels = {
  student: {
    adapter: 'dummy',
    tokenizer: 'qwen3',
    layers: 2,
    hidden: 64,
    heads: 4,
    kvHeads: 2,
    seed: 'demo-student',
    modelId: 'demo-student',
  },
  teacher: {
    adapter: 'dummy',
    tokenizer: 'qwen3',
    layers: 4,
    hidden: 128,
    heads: 8,
    kvHeads: 4,
    seed: 'demo-teacher',
    modelId: 'demo-teacher',
  },
} as const;

/**
 * Makes (once) the demo's student and teacher models under `dir` and returns their
 * directories. `hat stage distill` does the same by itself for `adapter: dummy` configs (into
 * `modelCacheDir`); call this to get plain `adapter: onnx` model directories instead.
 */
export function ensureDemoModels(dir: string): { studentDir: string; teacherDir: string } {
  const { adapter: _student, modelId: _studentId, ...student } = demoDistillModels.student;
  const { adapter: _teacher, modelId: _teacherId, ...teacher } = demoDistillModels.teacher;
  return { studentDir: ensureDummyModel(dir, student), teacherDir: ensureDummyModel(dir, teacher) };
}

/** The temperature both sides' logprobs are computed at: the config's, else the sampling temperature (1 when greedy). */
export function resolveLogprobTemperature(input: Pick<DistillInput, 'logprobTemperature' | 'sampling'>): number {
  return input.logprobTemperature ?? logprobTemperatureOf(input.sampling.temperature);
}

/**
 * Refuses a teacher that cannot score at the logprob temperature: servers compute prompt/input
 * logprobs at temperature 1 only (`fixedLogprobTemperature`), so a KL against student logprobs at
 * another temperature would compare two different distributions (slime #2085).
 */
export function checkLogprobTemperature(
  teacher: Pick<TokenScorer, 'engine' | 'fixedLogprobTemperature'>,
  temperature: number,
): void {
  const fixed = teacher.fixedLogprobTemperature;
  if (fixed === undefined || temperature === fixed) return;
  throw new BadInputError(
    'LOGPROB_TEMPERATURE_MISMATCH',
    `distill: the ${teacher.engine} teacher scores at temperature ${fixed} only (its prompt/input logprobs are log-softmax of the raw logits whatever the request's temperature), but the student's logprobs would be at ${temperature}; ` +
      `set logprobTemperature: ${fixed} (the student keeps sampling at its temperature; its logprobs are then recorded at ${fixed} too), sample at temperature ${fixed}, or use an onnx teacher`,
  );
}

/**
 * Refuses a student sampled elsewhere (no in-process decoder: a served model) whose sampled-token
 * logprobs are not of the distribution the reverse KL compares with the teacher's
 * (`logprobTemperature`, whole vocabulary): e.g. vLLM's default raw logprobs with
 * logprobTemperature 0.7, or processed logprobs under top-p. In-process students report logprobs
 * at the sampling temperature and at 1, and rescore any other.
 */
export function checkStudentLogprobs(
  student: TokenSampler,
  sampling: DistillSampling,
  temperature: number,
): LogprobDistribution | undefined {
  if (student.decoder) return undefined;
  return checkDistillLogprobs('distill student', student, sampling, temperature);
}

/** How messages name a model: `<role> <id> (<engine>, <directory>)` in-process, `(<engine> at <url>)` served. */
function modelLabel(
  role: string,
  model: { modelId: string; engine: string; location: string },
  inProcess: boolean,
): string {
  return `${role} ${model.modelId} (${model.engine}${inProcess ? ',' : ' at'} ${model.location})`;
}

/** The student, the teacher and what was checked about them, ready for a part. */
export interface DistillModels {
  /** In-process students: the ONNX model (sampling in batches, rescoring at other temperatures). */
  student?: OnnxTokenScorer;
  /** Every student: samples token ids with logprobs (served: vLLM /v1/completions, SGLang /generate, ...). */
  studentSampler: TokenSampler;
  /** The student's tokenizer and chat template (prompts are rendered and tokenized with it). */
  studentTokenizer: ChatTokenizer;
  teacher: TokenScorer;
  agreement: TokenizerAgreement;
}

export interface DistillModelsConfig {
  student: StudentModelConfig;
  teacher: TeacherModelConfig;
  modelCacheDir: string;
}

/** The student's sampler and the teacher's scorer as their adapters build them (nothing sent yet). */
export interface DistillPair {
  student: TokenSampler;
  teacher: TokenScorer;
}

export interface DistillOpenOptions {
  logger?: Logger;
  signal?: AbortSignal;
  /** Reads a tokenizer's chatTemplate override from `s3://` or `file://` (the stage's deps.openObject). */
  openObject?: StageDeps['openObject'];
}

function openObjectOf(options: DistillOpenOptions): StageDeps['openObject'] {
  return (
    options.openObject ??
    ((uri: string) => {
      throw new BadInputError(
        'BAD_CONFIG',
        `a tokenizer chatTemplate at ${uri} needs the stage's artifact store; open the models from a stage`,
      );
    })
  );
}

/**
 * Student and teacher models per process, opened once per config through their adapters
 * (`createTokenSampler`, `createTokenScorer`): ONNX sessions load on first use and stay loaded
 * for later parts (a teacher that is the student shares its session); a failed open is forgotten
 * so a retry starts afresh. Stages reach it through `StageServices.distillModels` (a worker may
 * supply its own).
 */
export class DistillModelCache {
  private readonly pairs = new Map<string, DistillPair>();
  private readonly sessions = new Map<string, Promise<DistillModels>>();
  private readonly inProcess = new InProcessModels();

  /**
   * The sampler and scorer of a config, built once (no request is sent: the stage checks them
   * before their tokenizers are compared). Throws MODEL_BAD_CONFIG for a config no adapter takes.
   */
  pair(config: DistillModelsConfig, options: Pick<DistillOpenOptions, 'logger'> = {}): DistillPair {
    const key = hashValue(config);
    let pair = this.pairs.get(key);
    if (!pair) {
      const dependencies = {
        logger: options.logger,
        modelCacheDir: config.modelCacheDir,
        inProcessModels: this.inProcess,
      };
      pair = {
        student: createTokenSampler(config.student, { ...dependencies, configPath: 'student' }),
        teacher: createTokenScorer(config.teacher, { ...dependencies, configPath: 'teacher' }),
      };
      this.pairs.set(key, pair);
    }
    return pair;
  }

  open(config: DistillModelsConfig, options: DistillOpenOptions = {}): Promise<DistillModels> {
    const key = hashValue(config);
    let session = this.sessions.get(key);
    if (!session) {
      session = this.create(this.pair(config, options), options);
      this.sessions.set(key, session);
      session.catch(() => this.sessions.delete(key));
    }
    return session;
  }

  async close(): Promise<void> {
    this.pairs.clear();
    this.sessions.clear();
    await this.inProcess.close();
  }

  private async create(pair: DistillPair, options: DistillOpenOptions): Promise<DistillModels> {
    const load = (source: NonNullable<TokenSampler['tokenizer']>, field: string) =>
      loadTokenizerSource(source, openObjectOf(options), field);
    const { student: studentSampler, teacher } = pair;
    if (studentSampler.tokenizer === undefined) {
      throw new BadInputError(
        'BAD_CONFIG',
        `student.tokenizer: the ${studentSampler.engine} student does not say its tokenizer; name it (a preset or a model directory)`,
      );
    }
    const studentTokenizer = await load(studentSampler.tokenizer, 'student.tokenizer');
    const studentLabel = modelLabel('student', studentSampler, studentSampler.decoder !== undefined);
    // A student sampled elsewhere gets the ids as they are: it must read them as the local tokenizer does.
    if (!studentSampler.decoder) {
      await checkSamplerTokenizer(studentSampler, studentTokenizer, {
        label: studentLabel,
        tokenizerLabel: `student.tokenizer ${studentTokenizer.name}`,
        signal: options.signal,
      });
    }
    const local = teacher.tokenizer ? (await load(teacher.tokenizer, 'teacher.tokenizer')).fingerprint : undefined;
    const configured = teacher.tokenizerFingerprint;
    if (local !== undefined && configured !== undefined && local !== configured) {
      throw new BadInputError(
        'TOKENIZER_MISMATCH',
        `teacher.tokenizer has fingerprint ${local} but teacher.tokenizerFingerprint says ${configured}; keep the one that describes the served model`,
      );
    }
    const agreement = await checkTokenizerAgreement({
      student: { label: studentLabel, tokenizer: studentTokenizer },
      teacher: {
        label: modelLabel('teacher', teacher, teacher.probe === undefined),
        fingerprint: local ?? configured,
        scorer: teacher,
      },
      signal: options.signal,
    });
    return {
      ...(studentSampler.decoder ? { student: studentSampler.decoder } : {}),
      studentSampler,
      studentTokenizer,
      teacher,
      agreement,
    };
  }
}

/** The cache `hat stage` and workers use when no service supplies one. */
export const processDistillModels = new DistillModelCache();
