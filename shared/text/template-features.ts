import type { ChatMessage, ToolSpec } from '../trajectory/messages';
import type { RenderOptions } from './chat-template';
import {
  defaultTemplateConventions,
  trajectoryToTemplateInput,
  type TemplateConventions,
  type TemplateMessage,
} from './template-input';

/** What a chat template does with tools, learned by rendering a probe conversation once at load. */
export interface TemplateFeatures extends TemplateConventions {
  /** Whether tool definitions reach the rendered text (DeepSeek-V3's and the plain Llama 3 template drop them). */
  rendersToolDefinitions: boolean;
  /** Whether assistant tool calls reach the rendered text in any supported shape. */
  rendersToolCalls: boolean;
}

type Render = (messages: TemplateMessage[], options: RenderOptions) => string;

const listedToolName = 'hat_probe_listed_tool';
const calledToolName = 'hat_probe_called_tool';
const argumentValue = 'hat-probe-value';

const probeTools: ToolSpec[] = [
  {
    type: 'function',
    function: { name: listedToolName, description: 'probe', parameters: { type: 'object', properties: {} } },
  },
];

// Call ids of nine alphanumerics: Mistral's templates refuse any other shape.
const probeMessages: ChatMessage[] = [
  { role: 'system', content: 'probe system' },
  { role: 'user', content: 'probe question' },
  {
    role: 'assistant',
    content: null,
    tool_calls: [
      {
        id: 'hatprobe1',
        type: 'function',
        function: { name: calledToolName, arguments: `{"hat_probe_argument":"${argumentValue}"}` },
      },
    ],
  },
  { role: 'tool', content: 'probe result', tool_call_id: 'hatprobe1' },
  { role: 'assistant', content: 'probe answer' },
];

/** Shapes tried in order: parsed arguments first, as serving (vLLM) sends them. */
const candidates: TemplateConventions[] = [
  { toolCallContent: 'empty-string', toolArguments: 'object' },
  { toolCallContent: 'null', toolArguments: 'object' },
  { toolCallContent: 'empty-string', toolArguments: 'string' },
  { toolCallContent: 'null', toolArguments: 'string' },
];

function tryRender(render: Render, messages: TemplateMessage[], options: RenderOptions): string | undefined {
  try {
    return render(messages, options);
  } catch {
    return undefined;
  }
}

/**
 * Finds how a template wants tool-calling turns: Qwen3 fails on null content, DeepSeek-V3 drops
 * calls unless content is null and prints parsed arguments as `[object Map]`. A shape counts when
 * the call's name and argument value appear and no object was stringified by accident.
 */
export function probeTemplateFeatures(render: Render): TemplateFeatures {
  const definitions = trajectoryToTemplateInput(probeMessages.slice(0, 2), probeTools);
  const rendersToolDefinitions =
    tryRender(render, definitions.messages, { tools: definitions.tools })?.includes(listedToolName) ?? false;
  for (const conventions of candidates) {
    const input = trajectoryToTemplateInput(probeMessages, probeTools, conventions);
    const text = tryRender(render, input.messages, { tools: input.tools });
    if (
      text !== undefined &&
      text.includes(calledToolName) &&
      text.includes(argumentValue) &&
      !text.includes('[object ')
    ) {
      return { ...conventions, rendersToolDefinitions, rendersToolCalls: true };
    }
  }
  return { ...defaultTemplateConventions, rendersToolDefinitions, rendersToolCalls: false };
}

/**
 * What a user should know about a target template before training on its renderings: it drops
 * tool definitions (the model learns to call tools it was never shown), never renders tool calls,
 * moves system messages after the first to the top (DeepSeek-V3.1), or has no thinking switch
 * for the run's `enableThinking`. One sentence each, naming the template.
 */
export function templateWarnings(
  tokenizer: {
    templateLabel: string;
    templateFeatures: TemplateFeatures;
    systemMessagePlacement: string;
    hookMessages: string;
    thinkingSwitches: readonly string[];
  },
  options: { enableThinking?: boolean } = {},
): string[] {
  const warnings: string[] = [];
  const name = `the chat template ${tokenizer.templateLabel}`;
  if (!tokenizer.templateFeatures.rendersToolDefinitions)
    warnings.push(
      `${name} drops tool definitions: samples with tools are trained without the tool list the model is served`,
    );
  if (!tokenizer.templateFeatures.rendersToolCalls)
    warnings.push(`${name} never renders tool calls: samples that train a tool-calling turn are refused`);
  if (tokenizer.systemMessagePlacement === 'moved-to-start' || tokenizer.systemMessagePlacement === 'dropped') {
    const what =
      tokenizer.systemMessagePlacement === 'moved-to-start'
        ? 'moves system messages after the first to the start'
        : 'drops system messages after the first';
    const handled =
      tokenizer.hookMessages === 'folded'
        ? 'hook messages are folded into the neighbouring turns instead'
        : 'hook messages are rendered where the template puts them';
    warnings.push(`${name} ${what}; ${handled}`);
  }
  if (options.enableThinking !== undefined && tokenizer.thinkingSwitches.length === 0)
    warnings.push(
      `${name} reads no thinking switch (enable_thinking or thinking): enableThinking=${options.enableThinking} changes nothing in its renderings`,
    );
  return warnings;
}
