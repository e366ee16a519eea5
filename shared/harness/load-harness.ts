import { ProblemCollector, type Problem } from '../errors';
import {
  HARNESS_FILE,
  SKILLS_DIR,
  TOOLS_DIR,
  readHarnessFiles,
  skillFilePath,
  splitFrontMatter,
  toolFilePath,
  type HarnessFiles,
} from './harness-files';
import {
  harnessFileSchema,
  hookSchema,
  promptSectionSchema,
  skillFrontMatterSchema,
  toolFileSchema,
} from './harness-schema';
import {
  capabilityArgumentEnums,
  capabilityArguments,
  type Harness,
  type HookDefinition,
  type JsonSchema,
  type PromptSection,
  type Skill,
  type ToolDefinition,
} from './harness-types';
import { checkJsonSchema, schemaPropertyPaths } from './json-schema-check';
import { SourceDocument, formatPath, type PathSegment } from './source-document';
import { harnessToFiles } from './write-harness';
import { hookPlaceholders } from './render';
import { mayHoldPythonNumbers, parseJsonKeepingFloats } from '../text/python-values';

/** Error code of every harness problem (exit code 2). */
export const BAD_HARNESS = 'BAD_HARNESS';

/** Loads and validates a harness directory; throws one ValidationError listing every problem. */
export async function loadHarness(directory: string): Promise<Harness> {
  return loadHarnessFromFiles(await readHarnessFiles(directory), directory);
}

/**
 * Loads and validates a harness from its files (relative POSIX path -> text), wherever they came
 * from (a directory, S3, memory). Throws one ValidationError (`[BAD_HARNESS]`, exit 2) listing
 * every problem with its file, line and path.
 */
export function loadHarnessFromFiles(files: HarnessFiles, source = 'harness'): Harness {
  const { harness, problems } = parseHarnessFiles(files);
  const collector = new ProblemCollector();
  collector.addAll(problems);
  collector.throwIfAny(BAD_HARNESS, `${source}: invalid harness`);
  return harness as Harness;
}

/** Every problem of an in-memory harness (for example an HSA variant), located in the files it would be written as. */
export function validateHarness(harness: Harness): Problem[] {
  // Two skills (or tools) with one name would share one file and hide each other.
  const problems: Problem[] = [];
  for (const [noun, names, path] of [
    ['skill', harness.skills.map((skill) => skill.id), skillFilePath],
    ['tool', harness.tools.map((tool) => tool.name), toolFilePath],
  ] as const) {
    names.forEach((name, index) => {
      if (names.indexOf(name) !== index)
        problems.push({
          file: path(name),
          message: `duplicate ${noun} ${JSON.stringify(name)}; ${noun} ids must be unique`,
        });
    });
  }
  return [...problems, ...parseHarnessFiles(harnessToFiles(harness)).problems];
}

interface Located<T> {
  value: T;
  document: SourceDocument;
  /** Path of the value inside its document. */
  path: PathSegment[];
}

/** Parses and cross-checks all files; `harness` is set when there is no problem. */
export function parseHarnessFiles(files: HarnessFiles): { harness?: Harness; problems: Problem[] } {
  const problems: Problem[] = [];
  const paths = Object.keys(files).sort();

  const manifest = parseManifest(files, problems);
  // A file that fails to parse still declares its name: references to it are not problems too.
  const unparsedSkills: string[] = [];
  const unparsedTools: string[] = [];
  const skills = paths
    .filter((path) => path.startsWith(`${SKILLS_DIR}/`))
    .flatMap((path) => {
      const parsed = parseSkillFile(path, files[path], problems);
      const stem = stemOf(path, SKILLS_DIR, '.md');
      if (parsed.length === 0 && stem !== undefined) unparsedSkills.push(stem);
      return parsed;
    });
  const tools = paths
    .filter((path) => path.startsWith(`${TOOLS_DIR}/`))
    .flatMap((path) => {
      const parsed = parseToolFile(path, files[path], problems);
      const stem = stemOf(path, TOOLS_DIR, '.json');
      if (parsed.length === 0 && stem !== undefined) unparsedTools.push(stem);
      return parsed;
    });
  const toolNames = new Set([
    ...reportDuplicates(tools, (tool) => tool.name, 'tool', ['function', 'name'], problems),
    ...unparsedTools,
  ]);
  const skillIds = new Set([
    ...reportDuplicates(skills, (skill) => skill.id, 'skill', ['id'], problems),
    ...unparsedSkills,
  ]);
  for (const skill of skills) {
    skill.value.tools.forEach((name, index) => {
      if (!toolNames.has(name))
        problems.push(
          skill.document.problem(
            ['tools', index],
            `skill uses tool ${JSON.stringify(name)}, which does not exist; add ${TOOLS_DIR}/${name}.json or fix the name`,
          ),
        );
    });
  }
  for (const tool of tools) checkBinding(tool, problems);

  if (!manifest) return { problems };
  const { document, envelope, sections, hooks } = manifest;
  reportDuplicates(sections, (section) => section.id, 'section', ['id'], problems);
  reportDuplicates(hooks, (hook) => hook.id, 'hook', ['id'], problems);
  for (const hook of hooks) {
    hook.value.skills?.forEach((id, index) => {
      if (!skillIds.has(id))
        problems.push(
          hook.document.problem(
            [...hook.path, 'skills', index],
            `hook names skill ${JSON.stringify(id)}, which does not exist; add ${SKILLS_DIR}/${id}.md or fix the id`,
          ),
        );
    });
    checkHook(hook, problems);
  }
  checkSections(sections, hooks, skills.length, document, problems);
  const orderedSkills = applyOrder(
    skills.map((skill) => skill.value),
    (skill) => skill.id,
    skillIds,
    envelope.order?.skills,
    'skills',
    document,
    problems,
  );
  const orderedTools = applyOrder(
    tools.map((tool) => tool.value),
    (tool) => tool.name,
    toolNames,
    envelope.order?.tools,
    'tools',
    document,
    problems,
  );

  if (problems.length > 0) return { problems };
  const harness: Harness = {
    id: envelope.id,
    version: envelope.version,
    persona: envelope.persona,
    prompt: { format: envelope.prompt.format, sections: sections.map((section) => section.value) },
    skills: orderedSkills,
    tools: orderedTools,
    hooks: hooks.map((hook) => hook.value),
  };
  if (envelope.meta !== undefined) harness.meta = envelope.meta;
  return { harness, problems };
}

function parseManifest(files: HarnessFiles, problems: Problem[]) {
  const text = files[HARNESS_FILE];
  if (text === undefined) {
    problems.push({
      file: HARNESS_FILE,
      message: 'missing; a harness needs harness.yaml (id, version, persona, prompt, hooks)',
    });
    return undefined;
  }
  const document = new SourceDocument(HARNESS_FILE, text, 'yaml');
  problems.push(...document.syntaxProblems);
  if (document.syntaxProblems.length > 0) return undefined;
  const raw = document.value as { prompt?: { sections?: unknown }; hooks?: unknown } | null;
  const parsed = harnessFileSchema.safeParse(raw);
  if (!parsed.success) problems.push(...document.zodProblems(parsed.error));
  // Parse entries one by one even when the envelope is broken: one pass shows every problem.
  const rawSections = Array.isArray(raw?.prompt?.sections) ? (raw.prompt.sections as unknown[]) : [];
  const rawHooks = Array.isArray(raw?.hooks) ? (raw.hooks as unknown[]) : [];
  const sections = parseEntries(rawSections, promptSectionSchema, document, ['prompt', 'sections'], problems);
  const hooks = parseEntries(rawHooks, hookSchema, document, ['hooks'], problems) as Array<Located<HookDefinition>>;
  if (!parsed.success) return undefined;
  return { document, envelope: parsed.data, sections: sections as Array<Located<PromptSection>>, hooks };
}

function parseEntries<T>(
  entries: unknown[],
  schema: { safeParse(value: unknown): { success: true; data: T } | { success: false; error: import('zod').ZodError } },
  document: SourceDocument,
  prefix: PathSegment[],
  problems: Problem[],
): Array<Located<T>> {
  const parsed: Array<Located<T>> = [];
  entries.forEach((entry, index) => {
    const result = schema.safeParse(entry);
    if (result.success) parsed.push({ value: result.data, document, path: [...prefix, index] });
    else problems.push(...document.zodProblems(result.error, [...prefix, index]));
  });
  return parsed;
}

function stemOf(path: string, directory: string, extension: string): string | undefined {
  return new RegExp(`^${directory}/([^/]+)\\${extension}$`).exec(path)?.[1];
}

function fileStem(path: string, directory: string, extension: string, problems: Problem[]): string | undefined {
  const stem = stemOf(path, directory, extension);
  if (stem === undefined) {
    problems.push({
      file: path,
      message: `unexpected file; ${directory}/ holds only ${directory}/<name>${extension} files`,
    });
    return undefined;
  }
  return stem;
}

function parseSkillFile(path: string, text: string, problems: Problem[]): Array<Located<Skill>> {
  const stem = fileStem(path, SKILLS_DIR, '.md', problems);
  if (stem === undefined) return [];
  const split = splitFrontMatter(text);
  if (!split) {
    problems.push({
      file: path,
      line: 1,
      message: 'missing YAML front matter; start the file with ---, then id, name, description, tools, then ---',
    });
    return [];
  }
  const document = new SourceDocument(path, split.frontMatter, 'yaml', 1);
  problems.push(...document.syntaxProblems);
  if (document.syntaxProblems.length > 0) return [];
  const parsed = skillFrontMatterSchema.safeParse(document.value);
  const bodyLine = split.frontMatter.split('\n').length + 3;
  if (split.body.trim() === '')
    problems.push({
      file: path,
      line: bodyLine,
      path: '(body)',
      message: 'the skill instructions (Markdown body after the front matter) are empty',
    });
  if (!parsed.success) {
    problems.push(...document.zodProblems(parsed.error));
    return [];
  }
  if (parsed.data.id !== stem)
    problems.push(
      document.problem(
        ['id'],
        `skill id ${JSON.stringify(parsed.data.id)} does not match the file name; rename the file to ${SKILLS_DIR}/${parsed.data.id}.md or change the id`,
      ),
    );
  return [{ value: { ...parsed.data, body: split.body }, document, path: [] }];
}

function parseToolFile(path: string, text: string, problems: Problem[]): Array<Located<ToolDefinition>> {
  const stem = fileStem(path, TOOLS_DIR, '.json', problems);
  if (stem === undefined) return [];
  const document = new SourceDocument(path, text, 'json');
  problems.push(...document.syntaxProblems);
  if (document.syntaxProblems.length > 0) return [];
  const parsed = toolFileSchema.safeParse(document.value);
  const rawParameters = (document.value as { function?: { parameters?: unknown } } | null)?.function?.parameters;
  // Schema problems are worth reporting even when another part of the file is broken.
  if (rawParameters && typeof rawParameters === 'object' && !Array.isArray(rawParameters)) {
    for (const problem of checkJsonSchema(rawParameters as Record<string, unknown>)) {
      problems.push(document.problem(['function', 'parameters', ...problem.path], problem.message));
    }
  }
  if (!parsed.success) {
    problems.push(...document.zodProblems(parsed.error));
    return [];
  }
  const { function: definition, 'x-hat-binding': binding } = parsed.data;
  if (definition.name !== stem)
    problems.push(
      document.problem(
        ['function', 'name'],
        `function name ${JSON.stringify(definition.name)} does not match the file name; rename the file to ${TOOLS_DIR}/${definition.name}.json or change the name`,
      ),
    );
  // Checked above as JSON.parse reads it; kept as Python reads it (`1.0` a float), for rendering.
  const parameters = mayHoldPythonNumbers(text)
    ? (parseJsonKeepingFloats(text) as { function: { parameters: JsonSchema } }).function.parameters
    : definition.parameters;
  return [
    {
      value: { name: definition.name, description: definition.description, parameters, binding },
      document,
      path: [],
    },
  ];
}

/** Reports every repeated key at its second and later occurrence; returns the set of keys. */
function reportDuplicates<T>(
  items: Array<Located<T>>,
  key: (value: T) => string,
  noun: string,
  keyPath: PathSegment[],
  problems: Problem[],
): Set<string> {
  const first = new Map<string, Located<T>>();
  for (const item of items) {
    const name = key(item.value);
    const earlier = first.get(name);
    if (earlier) {
      const where =
        earlier.document.file === item.document.file ? `at ${formatPath(earlier.path)}` : `in ${earlier.document.file}`;
      problems.push(
        item.document.problem(
          [...item.path, ...keyPath],
          `duplicate ${noun} ${JSON.stringify(name)} (also ${where}); ${noun} ids must be unique`,
        ),
      );
    } else {
      first.set(name, item);
    }
  }
  return new Set(first.keys());
}

function checkBinding(tool: Located<ToolDefinition>, problems: Problem[]): void {
  const { binding, parameters } = tool.value;
  const canonical: readonly string[] = capabilityArguments[binding.capability];
  const expected = canonical.length > 0 ? canonical.join(', ') : '(none)';
  const propertyPaths = new Set(schemaPropertyPaths(parameters).map((entry) => entry.path));
  const mapped = binding.arguments ?? {};
  for (const [path, name] of Object.entries(mapped)) {
    if (!propertyPaths.has(path))
      problems.push(
        tool.document.problem(
          ['x-hat-binding', 'arguments', path],
          `maps parameter path ${JSON.stringify(path)}, which the parameters schema does not define`,
        ),
      );
    if (!canonical.includes(name))
      problems.push(
        tool.document.problem(
          ['x-hat-binding', 'arguments', path],
          `maps to ${JSON.stringify(name)}, not an argument of capability ${binding.capability} (arguments: ${expected})`,
        ),
      );
  }
  const ignored = binding.ignoredArguments ?? [];
  ignored.forEach((path, index) => {
    if (!propertyPaths.has(path))
      problems.push(
        tool.document.problem(
          ['x-hat-binding', 'ignoredArguments', index],
          `lists parameter path ${JSON.stringify(path)}, which the parameters schema does not define`,
        ),
      );
    if (path in mapped)
      problems.push(
        tool.document.problem(
          ['x-hat-binding', 'ignoredArguments', index],
          `parameter path ${JSON.stringify(path)} is both mapped in x-hat-binding.arguments and ignored; keep one`,
        ),
      );
  });
  // A top-level parameter that is neither mapped, ignored nor a canonical name would be lost on the way to the simulator.
  const properties = (parameters.properties ?? {}) as Record<string, unknown>;
  for (const name of Object.keys(properties)) {
    const covered =
      name in mapped ||
      ignored.includes(name) ||
      Object.keys(mapped).some((path) => path.startsWith(`${name}.`) || path.startsWith(`${name}[]`));
    if (!covered && !canonical.includes(name)) {
      problems.push(
        tool.document.problem(
          ['function', 'parameters', 'properties', name],
          `parameter ${JSON.stringify(name)} is not an argument of capability ${binding.capability} (arguments: ${expected}); rename it or map it in x-hat-binding.arguments`,
        ),
      );
    }
  }
  const enums = capabilityArgumentEnums[binding.capability] ?? {};
  for (const [argument, respellings] of Object.entries(binding.enumValues ?? {})) {
    const allowed = enums[argument];
    if (!allowed) {
      problems.push(
        tool.document.problem(
          ['x-hat-binding', 'enumValues', argument],
          `capability ${binding.capability} has no enum argument ${JSON.stringify(argument)}`,
        ),
      );
      continue;
    }
    for (const [variantValue, canonicalValue] of Object.entries(respellings)) {
      if (!allowed.includes(canonicalValue)) {
        problems.push(
          tool.document.problem(
            ['x-hat-binding', 'enumValues', argument, variantValue],
            `maps to ${JSON.stringify(canonicalValue)}, not a value of ${argument} (values: ${allowed.join(', ')})`,
          ),
        );
      }
    }
  }
}

function checkHook(hook: Located<HookDefinition>, problems: Problem[]): void {
  const { value, document, path } = hook;
  if (value.placement === 'user_suffix' && (value.event === 'session_start' || value.event === 'after_tool_result')) {
    problems.push(
      document.problem(
        [...path, 'placement'],
        `placement user_suffix needs a user turn, which event ${value.event} does not have; use system_message or system_prompt`,
      ),
    );
  }
  if (value.placement === 'reminder_block' && value.event === 'session_start') {
    problems.push(
      document.problem(
        [...path, 'placement'],
        'placement reminder_block follows a user turn or tool result, which event session_start does not have; use system_message or system_prompt',
      ),
    );
  }
  const allowed = hookPlaceholders(value.constraint);
  for (const match of value.text.matchAll(/\{([A-Za-z_]+)\}/g)) {
    const name = match[1];
    if (!allowed.includes(name)) {
      problems.push(
        document.problem(
          [...path, 'text'],
          `unknown placeholder {${name}} for a ${value.constraint.type} constraint; use ${allowed.map((item) => `{${item}}`).join(', ')}`,
        ),
      );
    }
  }
  const constraint = value.constraint;
  if (
    constraint.type === 'tone' &&
    constraint.minMarkers !== undefined &&
    constraint.minMarkers > constraint.markers.length
  ) {
    problems.push(
      document.problem(
        [...path, 'constraint', 'minMarkers'],
        `minMarkers ${constraint.minMarkers} is more than the ${constraint.markers.length} markers listed`,
      ),
    );
  }
}

const generatedKinds = new Set(['skills', 'constraints', 'room_context']);

function checkSections(
  sections: Array<Located<PromptSection>>,
  hooks: Array<Located<HookDefinition>>,
  skillCount: number,
  document: SourceDocument,
  problems: Problem[],
): void {
  const kinds = new Map<string, number>();
  for (const section of sections) {
    const { kind, content } = section.value;
    kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
    if (!generatedKinds.has(kind) && content.trim() === '') {
      problems.push(
        document.problem(
          [...section.path, 'content'],
          `section ${JSON.stringify(section.value.id)} is empty; write its content or remove it`,
        ),
      );
    }
    if (generatedKinds.has(kind) && (kinds.get(kind) ?? 0) > 1) {
      problems.push(
        document.problem(
          [...section.path, 'kind'],
          `a second ${kind} section would repeat what the first one renders; keep one`,
        ),
      );
    }
    if (kind === 'skills' && skillCount === 0) {
      problems.push(
        document.problem(
          [...section.path, 'kind'],
          `skills section ${JSON.stringify(section.value.id)} is empty: the harness has no skills`,
        ),
      );
    }
  }
  const promptHooks = hooks.filter((hook) => hook.value.placement === 'system_prompt');
  if (skillCount > 0 && !kinds.has('skills')) {
    problems.push(
      document.problem(
        ['prompt', 'sections'],
        `the harness has ${skillCount} skills but no section of kind skills; the model would never see them`,
      ),
    );
  }
  for (const hook of promptHooks) {
    if (!kinds.has('constraints')) {
      problems.push(
        document.problem(
          [...hook.path, 'placement'],
          `hook is placed in system_prompt but the prompt has no constraints section to hold it; add one or move the hook`,
        ),
      );
    }
  }
  for (const section of sections) {
    if (section.value.kind === 'constraints' && promptHooks.length === 0 && section.value.content.trim() === '') {
      problems.push(
        document.problem(
          [...section.path, 'content'],
          `constraints section ${JSON.stringify(section.value.id)} is empty: no hook is placed in system_prompt and it has no content`,
        ),
      );
    }
  }
}

/** Orders skills/tools as `harness.yaml` lists them, else by id; reports lists that disagree with the files. */
function applyOrder<T>(
  items: T[],
  key: (item: T) => string,
  declared: Set<string>,
  order: string[] | undefined,
  field: 'skills' | 'tools',
  document: SourceDocument,
  problems: Problem[],
): T[] {
  const byKey = new Map(items.map((item) => [key(item), item]));
  if (!order) return [...byKey.keys()].sort().map((name) => byKey.get(name) as T);
  const seen = new Set<string>();
  const directory = field === 'skills' ? SKILLS_DIR : TOOLS_DIR;
  order.forEach((name, index) => {
    if (seen.has(name))
      problems.push(document.problem(['order', field, index], `${JSON.stringify(name)} is listed twice`));
    else if (!declared.has(name))
      problems.push(
        document.problem(
          ['order', field, index],
          `${JSON.stringify(name)} is listed but ${directory}/ has no such file`,
        ),
      );
    seen.add(name);
  });
  for (const name of declared) {
    if (!seen.has(name))
      problems.push(
        document.problem(
          ['order', field],
          `${JSON.stringify(name)} (in ${directory}/) is missing from order.${field}; list it or delete the file`,
        ),
      );
  }
  return order
    .filter((name, index) => byKey.has(name) && order.indexOf(name) === index)
    .map((name) => byKey.get(name) as T);
}
