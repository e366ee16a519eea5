import type { ChatMessage, ToolSpec } from '../trajectory/messages';
import { parseJsonKeepingFloats } from './python-values';

/** One tool call as chat templates read it. */
export interface TemplateToolCall {
  id?: string;
  type: 'function';
  function: {
    name: string;
    /**
     * The parsed JSON value (so `tojson` renders it the way serving does) or, for arguments
     * that are not valid JSON or for templates that concatenate arguments as text, the raw
     * string the model produced.
     */
    arguments: unknown;
  };
}

/** One message as chat templates read it (the OpenAI shape, arguments possibly parsed). */
export interface TemplateMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  /** Null only on assistant turns with tool calls, for templates that branch on `content is none`. */
  content: string | null;
  tool_calls?: TemplateToolCall[];
  tool_call_id?: string;
  reasoning_content?: string;
}

/** A tool definition as chat templates read it (`tool | tojson` renders it key by key). */
export interface TemplateTool {
  type: 'function';
  function: { name: string; description?: string; parameters: Record<string, unknown> };
}

/**
 * How a template wants tool-calling assistant turns: templates disagree, and the wrong shape
 * either fails to render or silently drops the call (see `probeTemplateFeatures`).
 */
export interface TemplateConventions {
  /** Content of a tool-calling turn whose content is null: `''` (what vLLM sends) or `null`. Default `'empty-string'`. */
  toolCallContent: 'empty-string' | 'null';
  /** `'object'`: parsed JSON (rendered by `tojson`); `'string'`: the raw JSON text. Default `'object'`. */
  toolArguments: 'object' | 'string';
}

export const defaultTemplateConventions: TemplateConventions = {
  toolCallContent: 'empty-string',
  toolArguments: 'object',
};

function parseArguments(raw: string, conventions: TemplateConventions): unknown {
  if (conventions.toolArguments === 'string') return raw;
  try {
    // Floats stay floats (`99.0`, not `99`), as Python's json.loads reads them at serving time.
    return parseJsonKeepingFloats(raw);
  } catch {
    // Invalid JSON is what the model produced: render it verbatim rather than repair it.
    return raw;
  }
}

/**
 * Converts stored OpenAI messages and tools into what chat templates expect at serving time:
 * tool-call arguments parsed from their JSON strings (invalid JSON kept as the raw string), tool
 * results as `tool` messages, tool definitions with the key order serving uses
 * (`type`, `function: { name, description, parameters }`).
 */
export function trajectoryToTemplateInput(
  messages: ChatMessage[],
  tools: ToolSpec[],
  conventions: TemplateConventions = defaultTemplateConventions,
): { messages: TemplateMessage[]; tools: TemplateTool[] } {
  const templateMessages = messages.map((message): TemplateMessage => {
    switch (message.role) {
      case 'system':
      case 'user':
        return { role: message.role, content: message.content };
      case 'tool':
        return { role: 'tool', content: message.content, tool_call_id: message.tool_call_id };
      case 'assistant': {
        const toolCalls = message.tool_calls ?? [];
        const hasToolCalls = toolCalls.length > 0;
        const content = message.content ?? (hasToolCalls && conventions.toolCallContent === 'null' ? null : '');
        const result: TemplateMessage = { role: 'assistant', content };
        if (hasToolCalls) {
          result.tool_calls = toolCalls.map((call) => ({
            id: call.id,
            type: 'function',
            function: { name: call.function.name, arguments: parseArguments(call.function.arguments, conventions) },
          }));
        }
        if (message.reasoning_content !== undefined) result.reasoning_content = message.reasoning_content;
        return result;
      }
    }
  });
  const templateTools = tools.map((tool): TemplateTool => {
    const { name, description, parameters } = tool.function;
    return {
      type: 'function',
      function: description === undefined ? { name, parameters } : { name, description, parameters },
    };
  });
  return { messages: templateMessages, tools: templateTools };
}
