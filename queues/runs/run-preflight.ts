import { stat } from 'node:fs/promises';
import { isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { fileUriToPath } from '../../shared/artifacts/artifact-uri';
import { readJsonl } from '../../shared/artifacts/jsonl-reader';
import { readManifest } from '../../shared/artifacts/manifest';
import { hasUrlCredentials } from '../../shared/config/url-credentials';
import { HatError, ValidationError, type Problem } from '../../shared/errors';
import { loadHarness } from '../../shared/harness/load-harness';
import type { PathSegment } from '../../shared/harness/source-document';
import { loadApiKey } from '../../shared/models/api-key';
import type { ModelEndpoint } from '../../shared/models/model-endpoint';
import { modelEndpointOf } from '../../shared/models/model-registry';
import { loadChatTokenizer } from '../../shared/text/load-chat-tokenizer';
import type { StageDeps } from '../stage-kit/define-stage';
import { isLatestSpecValue, resolveLatestInputs } from './latest-inputs';
import { planRun, type PlanRunOptions, type RunConfigSource, type RunPlan } from './run-config';
import { runLayout } from './run-layout';
import { readTaskSets } from '../stage-kit/task-inputs';
import { taskSchema } from '../../shared/simulator/tasks/task-schema';

/**
 * The checks `hat run` makes before it enqueues anything, beyond what planning checks: every
 * input a stage config names exists (artifact URIs by head or list; local paths on disk), every
 * model server a config names (any config whose registry entry describes an endpoint with a model
 * list, see shared/models/model-endpoint.ts) answers `GET /v1/models` with the configured API key
 * and lists the configured model, and a distillation student and teacher share a tokenizer when both can be
 * read here. It walks the stage configs as written, so it runs even when planning found problems,
 * and `hat run` reports both in one pass.
 *
 * Not checked here: URIs under the run's own output (other stages write them), values with
 * `${...}` references (the checkpoint of a trainer handoff, other stages' outputs), `latest`
 * inputs (resolving them lists their prefix already).
 */

/** A problem or note at a path of the run config (the config's locator adds file and line). */
export interface PreflightFinding {
  path: PathSegment[];
  message: string;
}

export interface PreflightResult {
  problems: PreflightFinding[];
  /** What could not be checked here and is checked later (printed, not fatal). */
  notes: PreflightFinding[];
}

export interface PreflightOptions {
  /** The store and key of a URI (a StoreCache's `openObject`). */
  openObject: StageDeps['openObject'];
  /** Where API keys named by apiKeyEnv are read. */
  environment: NodeJS.ProcessEnv;
  /** Ask every model server for its models. Off: `--skip-endpoint-checks` (offline planning). */
  checkEndpoints: boolean;
  /** Limit of one `GET /v1/models`, ms. Default 5000. */
  endpointTimeoutMs?: number;
  /** Relative local paths resolve against it. Default process.cwd(). */
  cwd?: string;
  /** `<artifacts>/runs/<runId>/`: URIs under it are the run's own outputs. */
  runOutputRoot?: string;
}

/** Keys whose string values (or lists of them) name inputs that may also be local paths. */
const inputKeys = new Set(['tasks', 'inputs', 'trajectories', 'harness', 'uri', 'modelDir', 'chatTemplate']);
const artifactUri = /^(s3|file):\/\//;

export async function preflightRunConfig(config: unknown, options: PreflightOptions): Promise<PreflightResult> {
  const result: PreflightResult = { problems: [], notes: [] };
  const stages = (config as { stages?: unknown } | null)?.stages;
  if (typeof stages !== 'object' || stages === null) return result;
  const inputs = new Map<string, PathSegment[]>();
  const endpoints = new Map<string, { endpoint: ModelEndpoint; path: PathSegment[] }>();
  const distillPairs: Array<{ student: unknown; teacher: unknown; path: PathSegment[] }> = [];

  const visit = (value: unknown, path: PathSegment[], key: string | undefined) => {
    if (isLatestSpecValue(value)) return;
    if (typeof value === 'string') {
      if (value.includes('${')) return;
      const isInput = artifactUri.test(value) || (key !== undefined && inputKeys.has(key));
      if (isInput && !(options.runOutputRoot && value.startsWith(options.runOutputRoot)) && !inputs.has(value))
        inputs.set(value, path);
      return;
    }
    if (Array.isArray(value)) return value.forEach((item, index) => visit(item, [...path, index], key));
    if (value === null || typeof value !== 'object') return;
    const record = value as Record<string, unknown>;
    const endpoint = modelEndpointOf(record);
    // A URL with credentials is refused by validation and never sent: a request would carry the key.
    if (
      endpoint?.modelsUrl !== undefined &&
      !JSON.stringify(record).includes('${') &&
      !hasUrlCredentials(endpoint.modelsUrl)
    ) {
      const id = JSON.stringify([
        endpoint.modelsUrl,
        endpoint.model,
        endpoint.apiKey?.apiKeyEnv,
        endpoint.apiKey?.apiKeyFile,
      ]);
      if (!endpoints.has(id)) endpoints.set(id, { endpoint, path });
    }
    if ('student' in record && 'teacher' in record)
      distillPairs.push({ student: record.student, teacher: record.teacher, path });
    for (const [child, item] of Object.entries(record)) visit(item, [...path, child], child);
  };
  for (const [name, stageConfig] of Object.entries(stages)) visit(stageConfig, ['stages', name], undefined);

  await Promise.all([
    ...[...inputs].map(async ([value, path]) => {
      const problem =
        (await inputProblem(value, options)) ??
        (await manifestProblem(value, options)) ??
        (await contentProblem(value, path, options));
      if (problem) result.problems.push({ path, message: problem });
    }),
    ...[...endpoints.values()].map(async ({ endpoint: server, path }) => {
      if (!options.checkEndpoints) return;
      const problems = await modelServerProblems(server, path, options);
      // An eval judge is optional: down, it leaves judge scores missing (with the reason), not the run refused.
      if (isJudgePath(path))
        result.notes.push(
          ...problems.map((problem) => ({
            ...problem,
            message: `the judge is not reachable: ${problem.message}; the run goes on and its judge scores will be missing, each with the reason (rule scores are unaffected)`,
          })),
        );
      else result.problems.push(...problems);
    }),
    ...distillPairs.map(async (pair) => {
      const finding = await tokenizerFinding(pair);
      if (finding?.problem) result.problems.push({ path: [...pair.path, 'teacher'], message: finding.message });
      else if (finding) result.notes.push({ path: [...pair.path, 'teacher'], message: finding.message });
    }),
  ]);
  const byPath = (left: PreflightFinding, right: PreflightFinding) =>
    JSON.stringify(left.path).localeCompare(JSON.stringify(right.path));
  result.problems.sort(byPath);
  result.notes.sort(byPath);
  return result;
}

/** An eval stage's judge model (`stages.<name>.judge.model`). */
function isJudgePath(path: PathSegment[]): boolean {
  return path.length >= 2 && path[path.length - 2] === 'judge' && path[path.length - 1] === 'model';
}

/** Why an input is not there (undefined: it is). */
async function inputProblem(value: string, options: PreflightOptions): Promise<string | undefined> {
  if (!artifactUri.test(value)) {
    const path = isAbsolute(value) ? value : resolve(options.cwd ?? process.cwd(), value);
    try {
      await stat(path);
      return undefined;
    } catch {
      return `${value} does not exist${path !== value ? ` (${path})` : ''}; fix the path, or give an s3:// or file:// URI`;
    }
  }
  try {
    const trimmed = value.replace(/\/+$/, '');
    const { store, key } = options.openObject(trimmed);
    if (!value.endsWith('/') && (await store.head(key))) return undefined;
    for await (const _object of store.list(key === '' ? '' : `${key}/`)) return undefined;
    return `${value} does not exist (no object, and no objects under it as a prefix); check the URI, or write the input there first`;
  } catch (error) {
    return `${value} cannot be checked: ${HatError.isInstance(error) ? error.message : String(error)}`;
  }
}

/**
 * What is wrong with a stage manifest given as an input (its object exists): not JSON or not a
 * manifest (a truncated copy), or objects it lists that are missing or have another size. A stage
 * would otherwise start and fail on the first object it cannot read.
 */
async function manifestProblem(value: string, options: PreflightOptions): Promise<string | undefined> {
  if (!value.endsWith('manifest.json')) return undefined;
  const local = artifactUri.test(value)
    ? value
    : pathToFileURL(isAbsolute(value) ? value : resolve(options.cwd ?? process.cwd(), value)).href;
  try {
    const { store, key } = options.openObject(local);
    const manifest = await readManifest(store, key);
    const missing: string[] = [];
    await Promise.all(
      manifest.objects.map(async (object) => {
        const target = options.openObject(object.uri);
        const info = await target.store.head(target.key);
        if (info?.bytes !== object.bytes) missing.push(object.uri);
      }),
    );
    if (missing.length === 0) return undefined;
    missing.sort();
    return `[MANIFEST_OBJECT_MISSING] ${value} lists ${missing.length} object(s) that are missing or changed size (${missing.slice(0, 3).join(', ')}${missing.length > 3 ? ', …' : ''}); rerun the ${manifest.stage} stage that wrote it, or give a complete output`;
  } catch (error) {
    return findingOf(error);
  }
}

/**
 * An error as one finding: its message with its `[CODE]` (the code the stage would have failed
 * with later: BAD_MANIFEST, BAD_ENCODING, UNKNOWN_FIELD, …), a problem list on the same line.
 */
function findingOf(error: unknown): string {
  const message = HatError.isInstance(error) ? error.message : String(error);
  return message.replace(/:\n\s*-\s*/, ': ').replace(/\n\s*-\s*/g, '; ');
}

/**
 * What is wrong inside an input that a stage would only find after the run started: a task set
 * with a bad record (not UTF-8, a field tasks do not have, a truncated gzip) or no tasks at all, a
 * harness directory with a broken tool schema. Local files and `file://` inputs are read whole; a
 * task set in S3 only up to its first task (enough to tell an empty or unreadable file, without
 * downloading a large one: its other records are checked by the stage). Undefined when the
 * content is fine or is not of a kind checked here.
 */
async function contentProblem(
  value: string,
  path: PathSegment[],
  options: PreflightOptions,
): Promise<string | undefined> {
  const key = [...path].reverse().find((segment) => typeof segment === 'string');
  const remote = value.startsWith('s3://');
  const uri =
    remote || value.startsWith('file://')
      ? value
      : pathToFileURL(isAbsolute(value) ? value : resolve(options.cwd ?? process.cwd(), value)).href;
  const jsonl = /\.jsonl(\.gz)?$/.test(uri);
  // A stage given no tasks would run, write nothing and leave every stage after it nothing to read.
  const noTasks = `[NO_TASKS] ${value} holds no tasks (an empty task set); give a file with at least one task (\`hat tasks generate --count <n> --out <file>\` writes one)`;
  try {
    if (remote) {
      if (key !== 'tasks' || !jsonl) return undefined;
      const { store, key: objectKey } = options.openObject(uri);
      for await (const _task of readJsonl(store, objectKey, { schema: taskSchema })) return undefined;
      return noTasks;
    }
    if (key === 'harness') {
      const directory = fileUriToPath(uri);
      if ((await stat(directory)).isDirectory()) await loadHarness(directory);
      return undefined;
    }
    if (key === 'tasks' && jsonl) {
      const { tasks } = await readTaskSets([{ uri }], options.openObject);
      return tasks.length === 0 ? noTasks : undefined;
    }
    if (key === 'inputs' && jsonl) {
      const { store, key: objectKey } = options.openObject(uri);
      for await (const _record of readJsonl(store, objectKey)) void _record;
    }
    return undefined;
  } catch (error) {
    return findingOf(error);
  }
}

/**
 * Problems of one model server (an endpoint with a model list: an `openai` adapter, a scoring
 * server, any HTTP adapter): unreachable, refusing the configured API key, not serving the
 * configured model. `GET <modelsUrl>`; an endpoint without a model list has none.
 */
export async function modelServerProblems(
  server: ModelEndpoint,
  path: PathSegment[],
  options: Pick<PreflightOptions, 'environment' | 'endpointTimeoutMs'>,
): Promise<PreflightFinding[]> {
  if (server.modelsUrl === undefined) return [];
  const baseUrl = server.baseUrl ?? server.modelsUrl;
  const model = server.model;
  const keySource = { apiKeyEnv: server.apiKey?.apiKeyEnv, apiKeyFile: server.apiKey?.apiKeyFile };
  const keyName = keySource.apiKeyFile
    ? `the file ${keySource.apiKeyFile}`
    : keySource.apiKeyEnv
      ? `$${keySource.apiKeyEnv}`
      : undefined;
  let authorization: string | undefined;
  try {
    authorization = loadApiKey(keySource, options.environment, path.map(String).join('.')).authorizationHeader();
  } catch (error) {
    return [
      {
        path: [...path, keySource.apiKeyFile ? 'apiKeyFile' : 'apiKeyEnv'],
        message: HatError.isInstance(error) ? error.message.replace(/^\[[A-Z_]+\] /, '') : String(error),
      },
    ];
  }
  const url = server.modelsUrl;
  const timeoutMs = options.endpointTimeoutMs ?? 5_000;
  let response: Response;
  try {
    response = await fetch(url, {
      headers: { accept: 'application/json', ...(authorization ? { authorization } : {}) },
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    const reason =
      (error as Error).name === 'TimeoutError'
        ? `no answer within ${timeoutMs} ms`
        : (cause?.code ?? cause?.message ?? (error as Error).message);
    return [
      {
        path: [...path, 'baseUrl'],
        message: `${baseUrl} does not answer GET /v1/models (${reason}); start the server or fix baseUrl, or pass --skip-endpoint-checks to plan without it`,
      },
    ];
  }
  // The body is read for the model list only: servers that refuse a key may echo it back.
  const body = await response.text().catch(() => '');
  if (response.status === 401 || response.status === 403) {
    return [
      {
        path: [...path, keyName ? (keySource.apiKeyFile ? 'apiKeyFile' : 'apiKeyEnv') : 'baseUrl'],
        message: `${url} refused ${keyName ? `the API key from ${keyName}` : 'a request without an API key'} (HTTP ${response.status}); ${keyName ? 'check the key' : 'set apiKeyEnv or apiKeyFile'}`,
      },
    ];
  }
  if (!response.ok)
    return [
      {
        path: [...path, 'baseUrl'],
        message: `${url} answered HTTP ${response.status}; check that baseUrl is the server's OpenAI-compatible root`,
      },
    ];
  let listed: string[] | undefined;
  try {
    const parsed = JSON.parse(body) as { data?: Array<{ id?: unknown }> };
    listed = Array.isArray(parsed.data) ? parsed.data.map((entry) => String(entry.id)) : undefined;
  } catch {
    listed = undefined;
  }
  if (!listed)
    return [
      {
        path: [...path, 'baseUrl'],
        message: `${url} did not answer with a model list ({"data": [{"id": ...}]}); check that baseUrl is an OpenAI-compatible server`,
      },
    ];
  if (model !== undefined && !listed.includes(model)) {
    return [
      {
        path: [...path, 'model'],
        message: `the server at ${baseUrl} does not serve "${model}" (it lists: ${listed.slice(0, 10).join(', ') || 'nothing'}); fix model`,
      },
    ];
  }
  return [];
}

/**
 * A model config's tokenizer as far as its endpoint description tells without its server
 * (`ModelEndpoint.tokenizer`); no fingerprint when it cannot.
 */
async function fingerprintOf(config: unknown): Promise<{ fingerprint?: string; label: string }> {
  const endpoint = modelEndpointOf(config);
  if (endpoint === undefined) return { label: String((config as { adapter?: unknown } | null)?.adapter ?? 'model') };
  const tokenizer = endpoint.tokenizer;
  const label =
    endpoint.baseUrl !== undefined
      ? `${endpoint.adapter} teacher ${tokenizer ? `(${tokenizer.field})` : endpoint.baseUrl}`
      : endpoint.simulated
        ? `${endpoint.adapter} model (${endpoint.source ?? 'generated'})`
        : `${endpoint.adapter} model ${endpoint.source ?? endpoint.model ?? ''}`;
  if (tokenizer?.fingerprint !== undefined) return { fingerprint: tokenizer.fingerprint, label };
  if (tokenizer?.source !== undefined)
    return { fingerprint: (await loadChatTokenizer(tokenizer.source)).fingerprint, label };
  return { label };
}

/** Whether a distillation student and teacher share a tokenizer, as far as can be told here. */
async function tokenizerFinding(pair: {
  student: unknown;
  teacher: unknown;
}): Promise<{ problem: boolean; message: string } | undefined> {
  let student: Awaited<ReturnType<typeof fingerprintOf>>;
  let teacher: Awaited<ReturnType<typeof fingerprintOf>>;
  try {
    [student, teacher] = await Promise.all([fingerprintOf(pair.student), fingerprintOf(pair.teacher)]);
  } catch (error) {
    return {
      problem: true,
      message: `cannot load a tokenizer to compare student and teacher: ${HatError.isInstance(error) ? error.message : String(error)}`,
    };
  }
  if (student.fingerprint && teacher.fingerprint) {
    if (student.fingerprint === teacher.fingerprint) return undefined;
    return {
      problem: true,
      message: `the teacher (${teacher.label}, tokenizer fingerprint ${teacher.fingerprint.slice(0, 16)}…) and the student (${student.label}, ${student.fingerprint.slice(0, 16)}…) do not share a tokenizer; teacher logprobs of the student's token ids would score different text. Pick models of one tokenizer family`,
    };
  }
  return {
    problem: false,
    message: `tokenizer agreement of ${student.label} and ${teacher.label} is checked when the stage plans (the distill stage probes the scoring endpoint); give teacher.tokenizerFingerprint to check it here`,
  };
}

/** Findings as problems of the config's locator. */
export function locateFindings(
  findings: PreflightFinding[],
  locate: (path: PathSegment[], message: string) => Problem,
): Problem[] {
  return findings.map((finding) => locate(finding.path, finding.message));
}

export interface PlanCheckedRunOptions
  extends Omit<PlanRunOptions, 'resolvedInputs' | 'file' | 'locator'>, Omit<PreflightOptions, 'runOutputRoot'> {}

/**
 * What `hat run` does before it enqueues: resolves `latest` inputs, plans the run and makes the
 * preflight checks, then throws one ValidationError (`BAD_RUN_CONFIG`, exit 2) listing every
 * problem of all three with file, line and path. Returns the plan and the notes to print;
 * `onDeprecatedSpelling` hears of old spellings as planning meets them, problems or not.
 */
export async function planCheckedRun(
  source: RunConfigSource,
  options: PlanCheckedRunOptions,
): Promise<{ plan: RunPlan; notes: Problem[] }> {
  const { locator, file } = source;
  const locate = (path: PathSegment[], message: string) => locator.problem(path, message);
  const latest = await resolveLatestInputs(source.value, { openObject: options.openObject, now: options.now });
  const problems: Problem[] = locateFindings(latest.problems, locate);
  let plan: RunPlan | undefined;
  try {
    plan = planRun(source.value, { ...options, file, locator, resolvedInputs: latest.resolved });
  } catch (error) {
    if (!(error instanceof ValidationError)) throw error;
    problems.push(...error.problems);
  }
  const runOutputRoot = plan ? `${runLayout(plan.artifactsRoot, plan.runId).root}/runs/${plan.runId}/` : undefined;
  const checked = await preflightRunConfig(source.value, { ...options, ...(runOutputRoot ? { runOutputRoot } : {}) });
  problems.push(...locateFindings(checked.problems, locate));
  if (problems.length > 0 || !plan)
    throw new ValidationError('BAD_RUN_CONFIG', `${file} has problems; fix them and run again`, problems);
  return { plan, notes: locateFindings(checked.notes, locate) };
}
