import { Environment, Interpreter, Template } from '@huggingface/jinja';
import { BadInputError } from '../errors';
import { hashValue, sha256Hex } from '../hash/hash';
import { strftime } from './strftime';
import type { TemplateMessage, TemplateTool } from './template-input';

/** A chat template as tokenizer_config.json stores it: one text, or named texts (`default`, `tool_use`, ...). */
export type ChatTemplateSource = string | Array<{ name: string; template: string }>;

export interface RenderOptions {
  /** Tool definitions the model sees; an empty list renders like none. */
  tools?: TemplateTool[];
  /** Append the header that opens the next assistant turn. Default false. */
  addGenerationPrompt?: boolean;
  /** Passed as `enable_thinking` when set (Qwen3 family); left undefined otherwise, as serving does. */
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
const globals: Record<string, unknown> = { true: true, false: false, none: null, True: true, False: false, None: null, range };

function compile(name: string, text: string): Template {
  try {
    return new Template(text);
  } catch (error) {
    throw new BadInputError('CHAT_TEMPLATE_INVALID', `chat template "${name}" does not parse: ${(error as Error).message}; fix the template or pass another one`, { cause: error });
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
  private readonly templates = new Map<string, Template>();
  private readonly texts = new Map<string, string>();

  constructor(source: ChatTemplateSource, private readonly specialTokenVariables: Record<string, unknown>) {
    if (typeof source === 'string') {
      this.texts.set('default', source);
      this.hash = sha256Hex(source);
    } else {
      for (const entry of source) this.texts.set(entry.name, entry.template);
      this.hash = hashValue(Object.fromEntries(this.texts));
    }
    this.names = [...this.texts.keys()];
    for (const [name, text] of this.texts) this.templates.set(name, compile(name, text));
  }

  render(messages: TemplateMessage[], options: RenderOptions = {}): string {
    const name = this.select(options);
    const now = options.now ?? new Date();
    const variables: Record<string, unknown> = {
      ...globals,
      raise_exception: (message: unknown) => {
        throw new Error(`template raised: ${String(message)}`);
      },
      strftime_now: (format: unknown) => strftime(now, String(format)),
      ...this.specialTokenVariables,
      messages,
      add_generation_prompt: options.addGenerationPrompt ?? false,
      ...options.variables,
    };
    // transformers passes tools=None when there are none; templates test `if tools`.
    if (options.tools && options.tools.length > 0) variables.tools = options.tools;
    if (options.enableThinking !== undefined) variables.enable_thinking = options.enableThinking;
    try {
      // Template.render declares its own strftime_now (local time zone and locale) and refuses
      // redeclaration, so the program runs in an environment built here instead.
      const environment = new Environment();
      for (const [key, value] of Object.entries(variables)) environment.set(key, value);
      return new Interpreter(environment).run(this.templates.get(name)!.parsed).value as string;
    } catch (error) {
      throw new BadInputError('CHAT_TEMPLATE_RENDER_FAILED', `chat template "${name}" failed to render: ${(error as Error).message}`, { cause: error });
    }
  }

  private select(options: Pick<RenderOptions, 'tools' | 'templateName'>): string {
    if (options.templateName !== undefined) {
      if (!this.texts.has(options.templateName)) {
        throw new BadInputError('CHAT_TEMPLATE_MISSING', `no chat template named "${options.templateName}" (have: ${this.names.join(', ')})`);
      }
      return options.templateName;
    }
    if (options.tools && options.tools.length > 0 && this.texts.has('tool_use')) return 'tool_use';
    if (this.texts.has('default')) return 'default';
    throw new BadInputError('CHAT_TEMPLATE_MISSING', `no "default" chat template among ${this.names.join(', ')}; name one with templateName`);
  }
}
