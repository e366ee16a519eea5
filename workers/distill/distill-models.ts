import { basename, join, resolve } from 'node:path';
import type { StageDeps } from '../../queues/stage-kit/define-stage';
import { loadTokenizerSource } from '../../queues/stage-kit/load-tokenizer-source';
import { BadInputError } from '../../shared/errors';
import { hashValue } from '../../shared/hash/hash';
import type { Logger } from '../../shared/log/logger';
import { readJsonObject } from '../../shared/models/onnx/tokenizer-source';
import { OnnxModelClient } from '../../shared/models/onnx/onnx-model-client';
import { logprobTemperatureOf } from '../../shared/models/onnx/token-sampler';
import { createRemoteScorer } from '../../shared/models/scoring/create-remote-scorer';
import { OnnxTokenScorer } from '../../shared/models/scoring/onnx-token-scorer';
import { checkTokenizerAgreement, type TokenizerAgreement } from '../../shared/models/scoring/tokenizer-agreement';
import type { TokenScorer } from '../../shared/models/scoring/token-scorer';
import { InProcessTokenSampler } from '../../shared/models/token-exact/in-process-token-sampler';
import { checkDistillLogprobs, type LogprobDistribution } from '../../shared/models/token-exact/logprob-distribution';
import { logprobsModeOf, ServedTokenSampler } from '../../shared/models/token-exact/served-token-sampler';
import { checkServedTokenizer } from '../../shared/models/token-exact/served-tokenizer-check';
import type { TokenSampler } from '../../shared/models/token-exact/token-sampler';
import type { ChatTokenizer } from '../../shared/text/chat-tokenizer';
import { loadChatTokenizer } from '../../shared/text/load-chat-tokenizer';
import type {
  DistillInput,
  DistillSampling,
  InProcessModelConfig,
  ServedStudentConfig,
  StudentModelConfig,
  TeacherModelConfig,
} from './distill-contract';

export { ensureDummyModel, type DummyModelOptions } from '../../shared/models/onnx/ensure-dummy-model';
import { ensureDummyModel } from '../../shared/models/onnx/ensure-dummy-model';

/** The two models of the demo: a small student and a larger teacher, random weights, Qwen3's tokenizer (so their fingerprints agree). */
export const demoDistillModels = {
  student: {
    engine: 'dummy',
    tokenizer: 'qwen3',
    layers: 2,
    hidden: 64,
    heads: 4,
    kvHeads: 2,
    seed: 'demo-student',
    modelId: 'demo-student',
  },
  teacher: {
    engine: 'dummy',
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
 * directories. `hat stage distill` does the same by itself for `engine: dummy` configs (into
 * `modelCacheDir`); call this to get plain `engine: onnx` model directories instead.
 */
export function ensureDemoModels(dir: string): { studentDir: string; teacherDir: string } {
  const { engine: _student, modelId: _studentId, ...student } = demoDistillModels.student;
  const { engine: _teacher, modelId: _teacherId, ...teacher } = demoDistillModels.teacher;
  return { studentDir: ensureDummyModel(dir, student), teacherDir: ensureDummyModel(dir, teacher) };
}

/** The model directory an in-process config names (generating a dummy model when it asks for one). */
export function modelDirectoryOf(config: InProcessModelConfig, modelCacheDir: string): string {
  if (config.engine === 'onnx') return resolve(config.modelDir);
  return ensureDummyModel(modelCacheDir, {
    tokenizer: config.tokenizer,
    layers: config.layers,
    hidden: config.hidden,
    heads: config.heads,
    kvHeads: config.kvHeads,
    seed: config.seed,
  });
}

/** The temperature both sides' logprobs are computed at: the config's, else the sampling temperature (1 when greedy). */
export function resolveLogprobTemperature(input: Pick<DistillInput, 'logprobTemperature' | 'sampling'>): number {
  return input.logprobTemperature ?? logprobTemperatureOf(input.sampling.temperature);
}

/**
 * Refuses a config whose teacher cannot score at the logprob temperature: servers compute
 * prompt/input logprobs at temperature 1 only, so a KL against student logprobs at another
 * temperature would compare two different distributions (slime #2085).
 */
export function checkLogprobTemperature(teacher: TeacherModelConfig, temperature: number): void {
  if (teacher.engine !== 'vllm' && teacher.engine !== 'sglang') return;
  if (temperature === 1) return;
  throw new BadInputError(
    'LOGPROB_TEMPERATURE_MISMATCH',
    `distill: the ${teacher.engine} teacher scores at temperature 1 only (its prompt/input logprobs are log-softmax of the raw logits whatever the request's temperature), but the student's logprobs would be at ${temperature}; ` +
      'set logprobTemperature: 1 (the student keeps sampling at its temperature; its logprobs are then recorded at 1 too), sample at temperature 1, or use an onnx teacher',
  );
}

/** Whether the student is served (vLLM or SGLang) rather than run in-process. */
export function isServedStudent(student: StudentModelConfig): student is ServedStudentConfig {
  return student.engine === 'vllm' || student.engine === 'sglang';
}

/**
 * Refuses a served student whose sampled-token logprobs are not of the distribution the reverse
 * KL compares with the teacher's (`logprobTemperature`, whole vocabulary): e.g. vLLM's default
 * raw logprobs with logprobTemperature 0.7, or processed logprobs under top-p. In-process
 * students report logprobs at the sampling temperature and at 1, and rescore any other.
 */
export function checkStudentLogprobs(
  student: StudentModelConfig,
  sampling: DistillSampling,
  temperature: number,
): LogprobDistribution | undefined {
  if (!isServedStudent(student)) return undefined;
  return checkDistillLogprobs('distill student', student.engine, logprobsModeOf(student), sampling, temperature);
}

/** The student, the teacher and what was checked about them, ready for a part. */
export interface DistillModels {
  /** In-process students: the ONNX model (sampling in batches, rescoring at other temperatures). */
  student?: OnnxTokenScorer;
  /** Every student: samples token ids with logprobs (served: vLLM /v1/completions or SGLang /generate). */
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
 * Student and teacher models per process, opened once per config: ONNX sessions load on first
 * use and stay loaded for later parts; a failed open is forgotten so a retry starts afresh.
 * Stages reach it through `StageServices.distillModels` (a worker may supply its own).
 */
export class DistillModelCache {
  private readonly sessions = new Map<string, Promise<DistillModels>>();
  private readonly inProcess = new Map<string, OnnxTokenScorer>();

  open(config: DistillModelsConfig, options: DistillOpenOptions = {}): Promise<DistillModels> {
    const key = hashValue(config);
    let session = this.sessions.get(key);
    if (!session) {
      session = this.create(config, options);
      this.sessions.set(key, session);
      session.catch(() => this.sessions.delete(key));
    }
    return session;
  }

  async close(): Promise<void> {
    const scorers = [...this.inProcess.values()];
    this.sessions.clear();
    this.inProcess.clear();
    await Promise.allSettled(scorers.map((scorer) => scorer.close()));
  }

  private async create(config: DistillModelsConfig, options: DistillOpenOptions): Promise<DistillModels> {
    let student: OnnxTokenScorer | undefined;
    let studentSampler: TokenSampler;
    let studentTokenizer: ChatTokenizer;
    let studentLabel: string;
    if (isServedStudent(config.student)) {
      const { tokenizer, ...served } = config.student;
      studentTokenizer = await loadTokenizerSource(tokenizer, openObjectOf(options), 'student.tokenizer');
      studentSampler = new ServedTokenSampler(served, { logger: options.logger, configPath: 'student' });
      studentLabel = `student ${served.model} (${served.engine} at ${studentSampler.location})`;
      // The student's ids go to the server as they are: it must read them as the local tokenizer does.
      await checkServedTokenizer(served, studentTokenizer, {
        label: studentLabel,
        tokenizerLabel: `student.tokenizer ${studentTokenizer.name}`,
        logger: options.logger,
        configPath: 'student',
        signal: options.signal,
      });
    } else {
      const studentDir = modelDirectoryOf(config.student, config.modelCacheDir);
      student = this.inProcessScorer(config.student, studentDir);
      studentSampler = new InProcessTokenSampler(student);
      studentTokenizer = await loadChatTokenizer({ modelDir: studentDir });
      studentLabel = `student ${student.modelId} (onnx, ${studentDir})`;
    }
    let teacher: TokenScorer;
    let teacherFingerprint: string | undefined;
    let teacherLabel: string;
    if (config.teacher.engine === 'onnx' || config.teacher.engine === 'dummy') {
      const teacherDir = modelDirectoryOf(config.teacher, config.modelCacheDir);
      teacher = this.inProcessScorer(config.teacher, teacherDir);
      teacherFingerprint = (await loadChatTokenizer({ modelDir: teacherDir })).fingerprint;
      teacherLabel = `teacher ${teacher.modelId} (onnx, ${teacherDir})`;
    } else {
      const { tokenizer, tokenizerFingerprint, ...endpoint } = config.teacher;
      teacher = createRemoteScorer(endpoint, { logger: options.logger, configPath: 'teacher' });
      const local = tokenizer
        ? (await loadTokenizerSource(tokenizer, openObjectOf(options), 'teacher.tokenizer')).fingerprint
        : undefined;
      if (local !== undefined && tokenizerFingerprint !== undefined && local !== tokenizerFingerprint) {
        throw new BadInputError(
          'TOKENIZER_MISMATCH',
          `teacher.tokenizer has fingerprint ${local} but teacher.tokenizerFingerprint says ${tokenizerFingerprint}; keep the one that describes the served model`,
        );
      }
      teacherFingerprint = local ?? tokenizerFingerprint;
      teacherLabel = `teacher ${teacher.modelId} (${teacher.engine} at ${teacher.location})`;
    }
    const agreement = await checkTokenizerAgreement({
      student: { label: studentLabel, tokenizer: studentTokenizer },
      teacher: { label: teacherLabel, fingerprint: teacherFingerprint, scorer: teacher },
      signal: options.signal,
    });
    return { ...(student ? { student } : {}), studentSampler, studentTokenizer, teacher, agreement };
  }

  /** One scorer per model directory and settings: a teacher that is the student shares its session and queue. */
  private inProcessScorer(config: InProcessModelConfig, modelDir: string): OnnxTokenScorer {
    const modelId = config.modelId ?? basename(modelDir);
    const maxLogitsFloats = config.maxLogitsFloats ?? defaultMaxLogitsFloats(modelDir, config.batchSize);
    const key = hashValue({
      modelDir,
      modelId,
      intraOpThreads: config.intraOpThreads,
      batchSize: config.batchSize,
      maxLogitsFloats,
    });
    let scorer = this.inProcess.get(key);
    if (!scorer) {
      scorer = new OnnxTokenScorer(
        new OnnxModelClient({ modelDir, modelId, intraOpThreads: config.intraOpThreads, maxLogitsFloats }),
        { modelDir, batchSize: config.batchSize },
      );
      this.inProcess.set(key, scorer);
    }
    return scorer;
  }
}

/** Most prompt tokens fed per forward call when the vocabulary is small. */
const maxChunkTokens = 64;

/**
 * Logits per forward call: the decoder feeds long prompts in chunks of maxLogitsFloats /
 * (batch × vocabulary) tokens, and attention holds chunk × prompt scores per head. A small
 * vocabulary (a byte tokenizer) would otherwise take whole 10k-token prompts in one chunk and
 * gigabytes of attention, so chunks stay at most 64 tokens; large vocabularies keep the
 * decoder's 16M default.
 */
function defaultMaxLogitsFloats(modelDir: string, batchSize: number): number {
  const vocabularySize = (readJsonObject(join(modelDir, 'config.json')).vocab_size as number | undefined) ?? 1;
  return Math.max(1, Math.min(16 * 1024 * 1024, maxChunkTokens * batchSize * vocabularySize));
}

/** The cache `hat stage` and workers use when no service supplies one. */
export const processDistillModels = new DistillModelCache();
