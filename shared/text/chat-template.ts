import { Environment, Template } from '@huggingface/jinja';
import { BadInputError, HatError } from '../errors';
import { compileProgram, type CompiledProgram } from './compiled-template';
import { hashValue, sha256Hex } from '../hash/hash';
import { strftime } from './strftime';
import { PythonInterpreter, toTemplateValue, type TemplateValue } from './python-interpreter';
import { headerStatementCount } from './template-header';
import type { TemplateMessage, TemplateTool } from './template-input';

/** A chat template as tokenizer_config.json stores it: one text, or named texts (`default`, `tool_use`, ...). */
export type ChatTemplateSource = string | Array<{ name: string; template: string }>;

export interface RenderOptions {
  /** Tool definitions the model sees; an empty list renders like none. */
  tools?: TemplateTool[];
  /** Append the header that opens the next assistant turn. Default false. */
  addGenerationPrompt?: boolean;
  /**
   * The template's thinking switch when set: `enable_thinking` (Qwen3 family) or `thinking`
   * (DeepSeek-V3.1), whichever the template reads (see ChatTemplate.thinkingSwitches); left
   * undefined otherwise, as serving does.
   */
  enableThinking?: boolean;
  /** The moment `strftime_now` formats (UTC). Default: the current time. */
  now?: Date;
  /** Which named template to use; default `tool_use` when tools are given and it exists, else `default`. */
  templateName?: string;
  /** Further template variables (`tools_in_user_message`, `date_string`, ...). */
  variables?: Record<string, unknown>;
}

/** Python's range(), as templates call it. */
function range(start: number, stop?: number, step = 1): number[] {
  const [from, to] = stop === undefined ? [0, start] : [start, stop];
  if (step === 0) throw new Error('range() step must not be zero');
  const values: number[] = [];
  for (let value = from; step > 0 ? value < to : value > to; value += step) values.push(value);
  return values;
}

/** The globals @huggingface/jinja's Template.render declares (its setupGlobals is not exported). */
const globals: Record<string, unknown> = {
  true: true,
  false: false,
  none: null,
  True: true,
  False: false,
  None: null,
  range,
};

/**
 * Variables templates read as their thinking switch, as users pass them in chat_template_kwargs:
 * Qwen3's `enable_thinking`, DeepSeek-V3.1's `thinking`.
 */
export const thinkingSwitchNames = ['enable_thinking', 'thinking'] as const;

/** Compiled renders always compared with the interpreter's, per ChatTemplate, before sampling starts. */
const compiledAlwaysChecked = 16;
/** After those, one compiled render in this many is compared. */
const compiledCheckInterval = 128;

function raiseException(message: unknown): never {
  throw new Error(`template raised: ${String(message)}`);
}

/** A node of @huggingface/jinja's syntax tree, as far as staticGenerationPrompt reads it. */
type SyntaxNode = { type: string; [field: string]: unknown };

const constantNames = new Set(['true', 'false', 'none', 'True', 'False', 'None']);

/** Whether an expression or block reads only literals and the given variables (no messages, tools, loops or calls). */
function readsOnly(node: SyntaxNode, variables: Set<string>): boolean {
  const all = (nodes: unknown) =>
    ((nodes as SyntaxNode[] | undefined) ?? []).every((child) => readsOnly(child, variables));
  switch (node.type) {
    case 'If':
      return readsOnly(node.test as SyntaxNode, variables) && all(node.body) && all(node.alternate);
    case 'StringLiteral':
    case 'NumericLiteral':
    case 'Comment':
      return true;
    case 'Identifier':
      return variables.has(node.value as string) || constantNames.has(node.value as string);
    case 'BinaryExpression':
      return readsOnly(node.left as SyntaxNode, variables) && readsOnly(node.right as SyntaxNode, variables);
    case 'UnaryExpression':
      return readsOnly(node.argument as SyntaxNode, variables);
    case 'TestExpression':
      // The test's name (`defined`, `false`) is not a variable.
      return readsOnly(node.operand as SyntaxNode, variables);
    default:
      return false;
  }
}

/** Every node under a value of the syntax tree (including the operator identifiers, which are harmless here). */
function* nodesOf(value: unknown): Generator<SyntaxNode> {
  if (Array.isArray(value)) {
    for (const item of value) yield* nodesOf(item);
  } else if (value !== null && typeof value === 'object') {
    if (typeof (value as SyntaxNode).type === 'string') yield value as SyntaxNode;
    for (const child of Object.values(value)) yield* nodesOf(child);
  }
}

/**
 * The template's generation-prompt block when it is static: the program's last statement is an
 * `if` testing `add_generation_prompt` that reads nothing but switches the caller passes
 * (`add_generation_prompt`, `enable_thinking`, special-token variables) and literals, no other
 * statement reads `add_generation_prompt`, and nothing assigns those variables. A rendering with
 * the generation prompt is then the rendering without it plus that block's output (the program's
 * output is its statements' outputs concatenated). Undefined for any other shape, e.g.
 * DeepSeek-V3's `add_generation_prompt and not ns.is_tool`, which depends on the last message.
 */
function staticGenerationPrompt(program: Template['parsed'], specialTokenNames: string[]): SyntaxNode | undefined {
  const body = (program as unknown as { body: SyntaxNode[] }).body;
  const last = body.at(-1);
  const switches = new Set(['add_generation_prompt', ...thinkingSwitchNames, ...specialTokenNames]);
  if (!last || last.type !== 'If' || !readsOnly(last, switches)) return undefined;
  const readsSwitch = (nodes: unknown) =>
    [...nodesOf(nodes)].some((node) => node.type === 'Identifier' && node.value === 'add_generation_prompt');
  if (!readsSwitch(last.test) || readsSwitch(body.slice(0, -1))) return undefined;
  for (const node of nodesOf(body)) {
    if (node.type !== 'Set') continue;
    const assigned = [...nodesOf(node.assignee)]
      .filter((child) => child.type === 'Identifier')
      .map((child) => child.value as string);
    if (assigned.some((name) => switches.has(name))) return undefined;
  }
  return last;
}

function compile(name: string, text: string): Template {
  try {
    return new Template(text);
  } catch (error) {
    throw new BadInputError(
      'CHAT_TEMPLATE_INVALID',
      `chat template "${name}" does not parse: ${(error as Error).message}; fix the template or pass another one`,
      { cause: error },
    );
  }
}

/**
 * A compiled chat template plus the variables transformers passes to every template (special
 * tokens, `raise_exception`, `strftime_now`), so a rendering equals what serving renders.
 */
export class ChatTemplate {
  /** sha256 of the template text; for named templates, of the canonical JSON of name → text. */
  readonly hash: string;
  readonly names: string[];
  /**
   * The thinking switches (thinkingSwitchNames) some template of this source reads; empty when
   * none does, and then `enableThinking` changes nothing.
   */
  readonly thinkingSwitches: string[];
  private readonly templates = new Map<string, Template>();
  private readonly texts = new Map<string, string>();
  /**
   * Tool lists converted to template values, by list identity. Converting deep JSON schemas
   * costs more than the rest of a render, and span location renders one conversation several
   * times with the same list; template values are immutable (only namespaces can be assigned),
   * so sharing them between renders is safe.
   */
  private readonly convertedTools = new WeakMap<TemplateTool[], TemplateValue>();
  /**
   * Messages converted to template values, by message identity: span location renders every
   * prefix of a conversation (the served prompts), so the same message objects are converted once
   * instead of once per prefix. Safe for the same reason as the tools.
   */
  private readonly convertedMessages = new WeakMap<TemplateMessage, TemplateValue>();
  /** Static generation prompts already rendered, by template name and the switches they read. */
  private readonly renderedPrompts = new Map<string, string>();
  /** Per template name: its header and the rest of its program, when it has a header (template-header.ts). */
  private readonly splitPrograms = new Map<string, { header: Template['parsed']; rest: Template['parsed'] }>();
  /**
   * Header outputs by first message, then by template name, tools list and switches. Weak on the
   * message: the cache lives as long as the conversation it serves.
   */
  private readonly headers = new WeakMap<TemplateMessage, Map<string, string>>();
  /** A number per tools list, for header keys. */
  private readonly toolIds = new WeakMap<TemplateTool[], number>();
  private nextToolId = 1;
  /** Per template name: its generation-prompt block when that block is static (staticGenerationPrompt). */
  private readonly staticPrompts = new Map<string, SyntaxNode | undefined>();
  /** Compiled programs by template name and part (`full`, or `rest` after a cached header); undefined: not compilable. */
  private readonly compiledPrograms = new Map<string, CompiledProgram | undefined>();
  /** Renders the compiled programs have made, for the comparison schedule (see checkCompiled). */
  private compiledRenders = 0;
  /** Renders by engine (a compiled program that met something it does not model counts as interpreted). */
  readonly renders = { compiled: 0, interpreted: 0 };

  constructor(
    source: ChatTemplateSource,
    private readonly specialTokenVariables: Record<string, unknown>,
    /**
     * `auto` (default): compiled programs where the template compiles, compared with the
     * interpreter as checkCompiled says; `interpreter`: never compiled; `compiled`: compiled and
     * never compared (tests and benches that measure one engine).
     */
    private readonly engine: 'auto' | 'interpreter' | 'compiled' = 'auto',
  ) {
    if (typeof source === 'string') {
      this.texts.set('default', source);
      this.hash = sha256Hex(source);
    } else {
      for (const entry of source) this.texts.set(entry.name, entry.template);
      this.hash = hashValue(Object.fromEntries(this.texts));
    }
    this.names = [...this.texts.keys()];
    const read = new Set<string>();
    for (const [name, text] of this.texts) {
      const template = compile(name, text);
      this.templates.set(name, template);
      for (const node of nodesOf(template.parsed))
        if (node.type === 'Identifier' && (thinkingSwitchNames as readonly unknown[]).includes(node.value))
          read.add(node.value as string);
      this.staticPrompts.set(name, staticGenerationPrompt(template.parsed, Object.keys(specialTokenVariables)));
      const body = (template.parsed as unknown as { body: unknown[] }).body;
      const headerLength = headerStatementCount(body, [
        ...Object.keys(globals),
        ...Object.keys(specialTokenVariables),
        'add_generation_prompt',
        ...thinkingSwitchNames,
      ]);
      if (headerLength > 0) {
        const program = (statements: unknown[]) =>
          ({ type: 'Program', body: statements }) as unknown as Template['parsed'];
        this.splitPrograms.set(name, {
          header: program(body.slice(0, headerLength)),
          rest: program(body.slice(headerLength)),
        });
      }
    }
    this.thinkingSwitches = thinkingSwitchNames.filter((switchName) => read.has(switchName));
  }

  /**
   * Renders a conversation. Message objects and tools lists are treated as immutable once
   * rendered: their converted values and the header output are remembered by identity.
   */
  render(messages: TemplateMessage[], options: RenderOptions = {}): string {
    const name = this.select(options);
    const split = this.splitPrograms.get(name);
    const first = messages[0];
    const useHeader = split !== undefined && first !== undefined && options.variables === undefined;
    const compiled =
      this.engine === 'interpreter' ? undefined : this.compiledProgram(name, useHeader ? 'rest' : 'full');
    if (compiled) {
      let body: string | undefined;
      try {
        body = compiled(this.variables(messages, options));
      } catch {
        // NotCompiled, or an error the template raises: the interpreter renders it (and reports the error).
        body = undefined;
      }
      if (body !== undefined) {
        this.renders.compiled++;
        const text = (useHeader ? this.header(name, split.header, first, messages, options, true) : '') + body;
        return this.checkCompiled(name, text, messages, options);
      }
    }
    this.renders.interpreted++;
    return this.interpret(name, messages, options);
  }

  /** Renders with @huggingface/jinja's interpreter. */
  private interpret(name: string, messages: TemplateMessage[], options: RenderOptions): string {
    try {
      const split = this.splitPrograms.get(name);
      const first = messages[0];
      if (split && first !== undefined && options.variables === undefined) {
        const header = this.header(name, split.header, first, messages, options);
        return header + (new PythonInterpreter(this.environment(messages, options)).run(split.rest).value as string);
      }
      return new PythonInterpreter(this.environment(messages, options)).run(this.templates.get(name)!.parsed)
        .value as string;
    } catch (error) {
      throw new BadInputError(
        'CHAT_TEMPLATE_RENDER_FAILED',
        `chat template "${name}" failed to render: ${(error as Error).message}`,
        { cause: error },
      );
    }
  }

  /**
   * A compiled rendering, compared with the interpreter's on the first renders of this template
   * and on one in `compiledCheckInterval` after. A difference among the first renders turns the
   * compiled program off for this template (the interpreter's text is returned, so nothing
   * differed); one later is an error, because texts not compared may have differed too.
   */
  private checkCompiled(name: string, text: string, messages: TemplateMessage[], options: RenderOptions): string {
    if (this.engine === 'compiled') return text;
    const count = ++this.compiledRenders;
    if (count > compiledAlwaysChecked && count % compiledCheckInterval !== 0) return text;
    const expected = this.interpret(name, messages, options);
    if (expected === text) return text;
    if (count <= compiledAlwaysChecked) {
      for (const key of this.compiledPrograms.keys()) this.compiledPrograms.set(key, undefined);
      return expected;
    }
    throw new HatError(
      'TEMPLATE_ENGINE_MISMATCH',
      `the compiled chat template "${name}" rendered a conversation differently from @huggingface/jinja (render ${count}); this is a bug in hat: report it with the template and the conversation`,
    );
  }

  /** Whether the template (by name, default the one selected for no tools) renders through a compiled program. */
  compiles(name = this.select({})): boolean {
    return this.compiledProgram(name, 'full') !== undefined;
  }

  private compiledProgram(name: string, part: 'full' | 'header' | 'rest'): CompiledProgram | undefined {
    const key = `${name}\u0000${part}`;
    if (!this.compiledPrograms.has(key)) {
      const program = part === 'full' ? this.templates.get(name)?.parsed : this.splitPrograms.get(name)?.[part];
      this.compiledPrograms.set(key, program ? compileProgram(program) : undefined);
    }
    return this.compiledPrograms.get(key);
  }

  /** The variables of environment(), as plain values for a compiled program. */
  private variables(messages: TemplateMessage[], options: RenderOptions): Record<string, unknown> {
    const now = options.now ?? new Date();
    const variables: Record<string, unknown> = {
      ...globals,
      raise_exception: raiseException,
      strftime_now: (format: unknown) => strftime(now, String(format)),
      ...this.specialTokenVariables,
      messages,
      add_generation_prompt: options.addGenerationPrompt ?? false,
      ...options.variables,
    };
    const tools = options.tools && options.tools.length > 0 ? options.tools : undefined;
    if (tools) variables.tools = tools;
    if (options.enableThinking !== undefined) {
      // Every switch the template reads (DeepSeek-V3.1 reads `thinking`); `enable_thinking` when it reads none.
      const switches = this.thinkingSwitches.length > 0 ? this.thinkingSwitches : ['enable_thinking'];
      for (const switchName of switches) variables[switchName] = options.enableThinking;
    }
    return variables;
  }

  /**
   * The text `addGenerationPrompt: true` appends to any rendering with these options, when the
   * template makes it the same for every conversation (see staticGenerationPrompt), else
   * undefined. Then `render(messages, { ...options, addGenerationPrompt: true })` equals
   * `render(messages, { ...options, addGenerationPrompt: false }) + generationPrompt(options)`
   * for all messages, and span location renders each served prompt once instead of twice.
   */
  generationPrompt(options: RenderOptions = {}): string | undefined {
    const name = this.select(options);
    const node = this.staticPrompts.get(name);
    if (!node) return undefined;
    // The block reads only the switches and special tokens (staticGenerationPrompt), so these key it.
    const key = JSON.stringify([name, options.enableThinking ?? null, options.variables ?? null]);
    const known = this.renderedPrompts.get(key);
    if (known !== undefined) return known;
    try {
      const program = { type: 'Program', body: [node] } as unknown as Template['parsed'];
      const prompt = new PythonInterpreter(this.environment([], { ...options, addGenerationPrompt: true })).run(program)
        .value as string;
      if (this.renderedPrompts.size < 64) this.renderedPrompts.set(key, prompt);
      return prompt;
    } catch (error) {
      throw new BadInputError(
        'CHAT_TEMPLATE_RENDER_FAILED',
        `chat template "${name}" failed to render its generation prompt: ${(error as Error).message}`,
        { cause: error },
      );
    }
  }

  /**
   * The variables a rendering sees. Template.render declares its own strftime_now (local time
   * zone and locale) and refuses redeclaration, so programs run in an environment built here.
   */
  private environment(messages: TemplateMessage[], options: RenderOptions): Environment {
    const variables = this.variables(messages, options);
    // transformers passes tools=None when there are none; templates test `if tools`. A tools
    // list is set below, converted once per list.
    const tools = options.tools && options.tools.length > 0 ? options.tools : undefined;
    if (tools) delete variables.tools;
    const environment = new Environment();
    const ownMessages = variables.messages === messages;
    if (ownMessages) delete variables.messages;
    for (const [key, value] of Object.entries(variables)) environment.setVariable(key, toTemplateValue(value));
    if (ownMessages) environment.setVariable('messages', this.messagesValue(messages));
    if (tools) {
      const converted = this.convertedTools.get(tools);
      if (converted) environment.setVariable('tools', converted);
      else {
        const value = toTemplateValue(tools);
        this.convertedTools.set(tools, value);
        environment.setVariable('tools', value);
      }
    }
    return environment;
  }

  /**
   * The output of a template's header for this first message, tools list and switches (rendered
   * once). `compiled`: rendered by the compiled header program when there is one (cached apart from
   * the interpreter's, so the comparisons of checkCompiled compare whole texts of the two engines).
   */
  private header(
    name: string,
    program: Template['parsed'],
    first: TemplateMessage,
    messages: TemplateMessage[],
    options: RenderOptions,
    compiled = false,
  ): string {
    const tools = options.tools && options.tools.length > 0 ? options.tools : undefined;
    let toolId = 0;
    if (tools) {
      toolId = this.toolIds.get(tools) ?? this.nextToolId++;
      this.toolIds.set(tools, toolId);
    }
    const key = `${name}\u0000${toolId}\u0000${String(options.addGenerationPrompt ?? false)}\u0000${String(options.enableThinking)}\u0000${compiled}`;
    let outputs = this.headers.get(first);
    const known = outputs?.get(key);
    if (known !== undefined) return known;
    let output: string | undefined;
    const headerProgram = compiled ? this.compiledProgram(name, 'header') : undefined;
    if (headerProgram) {
      try {
        output = headerProgram(this.variables(messages, options));
      } catch {
        output = undefined;
      }
    }
    output ??= new PythonInterpreter(this.environment(messages, options)).run(program).value as string;
    if (!outputs) this.headers.set(first, (outputs = new Map()));
    outputs.set(key, output);
    return output;
  }

  /** The messages as one template list, each message converted once per message object. */
  private messagesValue(messages: TemplateMessage[]): TemplateValue {
    const items = messages.map((message) => {
      let value = this.convertedMessages.get(message);
      if (!value) {
        value = toTemplateValue(message);
        this.convertedMessages.set(message, value);
      }
      return value;
    });
    // The library does not export its list class; a converted empty list carries its constructor.
    const list = toTemplateValue([]);
    return new list.constructor(items);
  }

  private select(options: Pick<RenderOptions, 'tools' | 'templateName'>): string {
    if (options.templateName !== undefined) {
      if (!this.texts.has(options.templateName)) {
        throw new BadInputError(
          'CHAT_TEMPLATE_MISSING',
          `no chat template named "${options.templateName}" (have: ${this.names.join(', ')})`,
        );
      }
      return options.templateName;
    }
    if (options.tools && options.tools.length > 0 && this.texts.has('tool_use')) return 'tool_use';
    if (this.texts.has('default')) return 'default';
    throw new BadInputError(
      'CHAT_TEMPLATE_MISSING',
      `no "default" chat template among ${this.names.join(', ')}; name one with templateName`,
    );
  }
}
