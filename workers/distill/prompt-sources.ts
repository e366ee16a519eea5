import { existsSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { asArtifactUri } from '../../shared/artifacts/artifact-uri';
import { z } from 'zod';
import type { ArtifactStore } from '../../shared/artifacts/artifact-store';
import { readJsonl } from '../../shared/artifacts/jsonl-reader';
import { BadInputError } from '../../shared/errors';
import { sha256Hex } from '../../shared/hash/hash';
import { harnessHash } from '../../shared/harness/harness-hash';
import { loadHarness } from '../../shared/harness/load-harness';
import { sampleHarnessDirectory } from '../../shared/harness/sample-harness';
import { generateTasksOf } from '../../shared/simulator/tasks/task-generator';
import { taskSchema, type Task } from '../../shared/simulator/tasks/task-schema';
import { chatMessageSchema, toolSpecSchema, type ChatMessage, type ToolSpec } from '../../shared/trajectory/messages';
import type { DistillInput, PromptSource } from './distill-contract';
import { taskFirstTurn } from './task-prompts';

/** One prompt of the stage: what the student answers. */
export const distillPromptSchema = z.object({
  /** Prompt set label (`builtin:general-instructions`, a JSONL file's name, `tasks`). */
  source: z.string().min(1),
  /** Unique within its source. */
  id: z.string().min(1),
  messages: z.array(chatMessageSchema).min(1),
  tools: z.array(toolSpecSchema).optional(),
});
export type DistillPrompt = z.infer<typeof distillPromptSchema>;

/** Schema version of the prompt snapshot `plan` writes. */
export const DISTILL_PROMPTS_SCHEMA_VERSION = 1;

/**
 * A line of a user prompt file: `{id, messages, tools?}` (OpenAI chat messages ending with a user
 * or tool turn) or `{id, prompt, system?}`, with optional `tags`. Any other field is refused
 * (UNKNOWN_FIELD), as in every record the pipeline reads.
 */
export const promptRecordSchema = z
  .object({
    id: z.union([z.string().min(1), z.number().int()]).transform(String),
    /** Labels for whoever reads the file (`["en", "ifeval"]`); the stage does not use them. */
    tags: z.array(z.string()).optional(),
    messages: z.array(chatMessageSchema).min(1).optional(),
    tools: z.array(toolSpecSchema).optional(),
    prompt: z.string().min(1).optional(),
    system: z.string().min(1).optional(),
  })
  .superRefine((record, context) => {
    if ((record.messages === undefined) === (record.prompt === undefined)) {
      context.addIssue({
        code: 'custom',
        message: 'give exactly one of "messages" (chat messages) or "prompt" (a user message text)',
        path: [],
      });
      return;
    }
    if (record.messages !== undefined && record.system !== undefined)
      context.addIssue({
        code: 'custom',
        message: '"system" goes with "prompt"; put a system message into "messages" instead',
        path: ['system'],
      });
    const last = record.messages?.at(-1);
    if (last && last.role !== 'user' && last.role !== 'tool') {
      context.addIssue({
        code: 'custom',
        message: `the last message is "${last.role}"; end with the user (or tool) turn the student should answer`,
        path: ['messages', record.messages!.length - 1, 'role'],
      });
    }
  });

/** Where the shipped prompt sets live, from sources and from compiled code alike. */
export function builtinPromptsDirectory(): string {
  const candidates = ['../..', '../../..'].map((up) => join(__dirname, up, 'examples', 'prompts'));
  return candidates.find((candidate) => existsSync(join(candidate, 'general-instructions.jsonl'))) ?? candidates[0];
}

export interface LoadedPrompts {
  prompts: DistillPrompt[];
  /** Every input read, with its content hash (files: sha256 of the bytes; harnesses: their content hash). */
  lineage: Array<{ uri: string; sha256: string }>;
}

type OpenObject = (uri: string) => { store: ArtifactStore; key: string };

/** Reads every prompt source of the config in order, checks ids are unique per source, applies limits. */
export async function loadPrompts(
  input: Pick<DistillInput, 'prompts' | 'inputs'>,
  openObject: OpenObject,
): Promise<LoadedPrompts> {
  const sources: PromptSource[] = [
    ...input.prompts,
    ...input.inputs.map((uri): PromptSource => ({ kind: 'jsonl', uri })),
  ];
  const prompts: DistillPrompt[] = [];
  const lineage: LoadedPrompts['lineage'] = [];
  for (const source of sources) {
    const loaded = await loadSource(source, openObject);
    const seen = new Set(prompts.filter((prompt) => prompt.source === loaded.source).map((prompt) => prompt.id));
    for (const prompt of loaded.prompts.slice(0, source.limit ?? loaded.prompts.length)) {
      if (seen.has(prompt.id)) {
        throw new BadInputError(
          'DUPLICATE_PROMPT_ID',
          `prompt id "${prompt.id}" appears twice in source "${loaded.source}" (${loaded.where}); prompt ids must be unique within a source: fix the ids, or give the second file its own name`,
        );
      }
      seen.add(prompt.id);
      prompts.push({ source: loaded.source, ...prompt });
    }
    lineage.push(...loaded.lineage);
  }
  if (prompts.length === 0)
    throw new BadInputError(
      'NO_PROMPTS',
      'the prompt sources of the distill stage hold no prompts; add prompts or remove the limits',
    );
  return { prompts, lineage };
}

interface LoadedSource {
  source: string;
  where: string;
  prompts: Array<Omit<DistillPrompt, 'source'>>;
  lineage: Array<{ uri: string; sha256: string }>;
}

async function loadSource(source: PromptSource, openObject: OpenObject): Promise<LoadedSource> {
  switch (source.kind) {
    case 'builtin': {
      const uri = asArtifactUri(join(builtinPromptsDirectory(), `${source.name}.jsonl`));
      return { ...(await readPromptFile(uri, openObject)), source: `builtin:${source.name}` };
    }
    case 'jsonl': {
      const uri = asArtifactUri(source.uri);
      return {
        ...(await readPromptFile(uri, openObject)),
        source: source.name ?? basename(uri).replace(/\.(jsonl|json)(\.gz)?$/, ''),
      };
    }
    case 'tasks': {
      const harnessDirectory = resolve(source.harness ?? sampleHarnessDirectory());
      const harness = await loadHarness(harnessDirectory);
      const lineage = [{ uri: pathToFileURL(harnessDirectory).href, sha256: harnessHash(harness) }];
      let tasks: Task[];
      let where: string;
      if (source.uri !== undefined) {
        const uri = asArtifactUri(source.uri);
        const { store, key } = openObject(uri);
        tasks = await collect(readJsonl(store, key, { schema: taskSchema }));
        lineage.push({ uri, sha256: sha256Hex(await store.getBuffer(key)) });
        where = uri;
      } else {
        const generate = source.generate!;
        tasks = generateTasksOf(generate, 'distill.prompts[].generate');
        where = `tasks generated with seed ${generate.seed}`;
      }
      return {
        source: source.name ?? 'tasks',
        where,
        lineage,
        prompts: tasks.map((task) => ({ id: task.id, ...taskFirstTurn(task, harness) })),
      };
    }
  }
}

async function readPromptFile(uri: string, openObject: OpenObject): Promise<Omit<LoadedSource, 'source'>> {
  const { store, key } = openObject(uri);
  const records = await collect(readJsonl(store, key, { schema: promptRecordSchema }));
  const prompts = records.map((record) => {
    const messages: ChatMessage[] = record.messages ?? [
      ...(record.system ? [{ role: 'system' as const, content: record.system }] : []),
      { role: 'user', content: record.prompt! },
    ];
    const tools: ToolSpec[] | undefined = record.tools && record.tools.length > 0 ? record.tools : undefined;
    return { id: record.id, messages, ...(tools ? { tools } : {}) };
  });
  return { where: uri, prompts, lineage: [{ uri, sha256: sha256Hex(await store.getBuffer(key)) }] };
}

async function collect<T>(records: AsyncIterable<T>): Promise<T[]> {
  const items: T[] = [];
  for await (const record of records) items.push(record);
  return items;
}
