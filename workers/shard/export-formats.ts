import { hashValue } from '../../shared/hash/hash';
import { parseJsonKeepingFloats, stringifyJsonKeepingFloats } from '../../shared/text/python-values';
import type { ChatMessage, ToolCall, ToolSpec } from '../../shared/trajectory/messages';
import type { ExportFormat } from './shard-contract';

/**
 * The conversations of a split in the JSONL shapes other trainers ingest. Each record carries
 * `tools` as a JSON string (one schema for every row whatever the tools: mixed tool schemas break
 * Arrow/HF dataset schema unification) and the sample's lineage (`id`, `source_id`, `task_id`).
 *
 * - `openai`: the OpenAI chat shape that `tokenizer.apply_chat_template(messages, tools=...)`
 *   reads (verl's MultiTurnSFTDataset, TRL): assistant `tool_calls` with `arguments` as the
 *   parsed JSON object (Qwen-style templates `tojson` it; invalid JSON stays the recorded
 *   string), `tool` messages with `tool_call_id`, every message kept where it was, including
 *   system messages in the middle (hook injections).
 * - `ms-swift`: ms-swift's agent format: roles system/user/assistant/`tool_call`/`tool_response`;
 *   each call is a `tool_call` message whose content is the JSON text of
 *   `{"name", "arguments": <object>}`; text an assistant said before its calls stays an
 *   `assistant` message in front of them.
 * - `llama-factory`: LLaMA-Factory's sharegpt format with OpenAI-style tags (`role`/`content`,
 *   tags user/assistant/`function_call`/`observation`, system prompt in the `system` column):
 *   a turn's calls are one `function_call` message (a JSON object, or a list for parallel
 *   calls) and consecutive tool results are one `observation` (joined by newlines), because the
 *   format needs user/observation and assistant/function_call turns to alternate. Text said
 *   before calls has no place there and is dropped (counted).
 *
 * Both ms-swift and LLaMA-Factory take one system prompt at the start, so system messages later
 * in a conversation (hook injections) are folded into the neighbouring user-side turn: appended
 * to the user or tool turn before them, or put in front of the user turn after them (counted).
 */

export type ExportRecord = Record<string, unknown>;

export interface ExportConversation {
  id: string;
  sourceId: string;
  taskId: string;
  messages: readonly ChatMessage[];
  tools: readonly ToolSpec[];
  enableThinking?: boolean;
  /** Hook system messages the target template's rendering folded into neighbouring turns (0: none). */
  foldedHookMessages?: number;
}

/** What a format's body is made of: the conversation without its lineage. */
export type ExportContent = Pick<ExportConversation, 'messages' | 'tools'>;

/** What a conversion lost or could not do; summed per format in the manifest. */
export interface ExportNotes {
  /** Later system messages folded into a neighbouring turn. */
  foldedSystemMessages: number;
  /** Assistant text before tool calls that the format cannot carry. */
  droppedCallText: number;
  /** The conversation has no shape the format accepts (the record is left out). */
  skipped?: string;
}

function parsedArguments(raw: string): unknown {
  try {
    // `99.0` stays a float, as json.loads reads it in the trainer and as the shard renders it.
    return parseJsonKeepingFloats(raw);
  } catch {
    // What the model produced, kept rather than repaired.
    return raw;
  }
}

function callJson(call: ToolCall): { name: string; arguments: unknown } {
  return { name: call.function.name, arguments: parsedArguments(call.function.arguments) };
}

/**
 * The tools list as the JSON string every format carries: what Python's
 * `json.dumps(tools, separators=(',', ':'), ensure_ascii=False)` writes, so a float in a schema
 * (`"minimum": 1.0`) reads back a float (JSON.stringify writes `1`).
 */
export function toolsJson(tools: readonly ToolSpec[]): string {
  return stringifyJsonKeepingFloats(tools);
}

/** An export body's JSON text, tool-call arguments keeping their floats (see toolsJson). */
export function exportBodyJson(body: ExportRecord): string {
  return stringifyJsonKeepingFloats(body);
}

/** sha256 of the canonical tools list: rows with the same tools share it (verl Parquet column). */
export function toolsSchemaHash(tools: readonly ToolSpec[]): string {
  return hashValue(tools);
}

/** OpenAI chat messages as apply_chat_template reads them (arguments parsed). */
export function openAiMessages(messages: readonly ChatMessage[]): Array<Record<string, unknown>> {
  return messages.map((message) => {
    if (message.role !== 'assistant') return { ...message };
    const calls = message.tool_calls ?? [];
    const converted: Record<string, unknown> = { role: 'assistant', content: message.content ?? '' };
    if (message.reasoning_content !== undefined) converted.reasoning_content = message.reasoning_content;
    if (calls.length > 0)
      converted.tool_calls = calls.map((call) => ({ id: call.id, type: 'function', function: callJson(call) }));
    return converted;
  });
}

type Turn = { role: string; content: string };

/** User-side roles of a format: where a folded system message can go. */
function foldSystemMessages(
  turns: Turn[],
  userSide: Set<string>,
  notes: ExportNotes,
): { system?: string; turns: Turn[] } {
  const leading: string[] = [];
  let index = 0;
  while (index < turns.length && turns[index].role === 'system') leading.push(turns[index++].content);
  const result: Turn[] = [];
  let pending: string[] = [];
  for (; index < turns.length; index++) {
    const turn = turns[index];
    if (turn.role === 'system') {
      notes.foldedSystemMessages++;
      const previous = result.at(-1);
      if (previous && userSide.has(previous.role)) previous.content = `${previous.content}\n\n${turn.content}`;
      else pending.push(turn.content);
      continue;
    }
    if (pending.length > 0 && userSide.has(turn.role)) {
      result.push({ role: turn.role, content: [...pending, turn.content].join('\n\n') });
      pending = [];
      continue;
    }
    result.push({ ...turn });
  }
  // A system message with no user-side turn after it cannot be placed; it stays with the system prompt.
  leading.push(...pending);
  return { ...(leading.length > 0 ? { system: leading.join('\n\n') } : {}), turns: result };
}

function msSwiftRecord(conversation: ExportContent, notes: ExportNotes): ExportRecord {
  const turns: Turn[] = [];
  for (const message of conversation.messages) {
    if (message.role === 'assistant') {
      const calls = message.tool_calls ?? [];
      const text = message.content ?? '';
      if (calls.length === 0 || text !== '') turns.push({ role: 'assistant', content: text });
      for (const call of calls) turns.push({ role: 'tool_call', content: stringifyJsonKeepingFloats(callJson(call)) });
    } else if (message.role === 'tool') turns.push({ role: 'tool_response', content: message.content });
    else turns.push({ role: message.role, content: message.content });
  }
  const folded = foldSystemMessages(turns, new Set(['user', 'tool_response']), notes);
  const messages = [
    ...(folded.system !== undefined ? [{ role: 'system', content: folded.system }] : []),
    ...folded.turns,
  ];
  return { messages };
}

function llamaFactoryRecord(conversation: ExportContent, notes: ExportNotes): ExportRecord {
  const turns: Turn[] = [];
  for (const message of conversation.messages) {
    if (message.role === 'assistant') {
      const calls = message.tool_calls ?? [];
      if (calls.length === 0) {
        turns.push({ role: 'assistant', content: message.content ?? '' });
        continue;
      }
      if ((message.content ?? '').trim() !== '') notes.droppedCallText++;
      const json = calls.length === 1 ? callJson(calls[0]) : calls.map(callJson);
      turns.push({ role: 'function_call', content: stringifyJsonKeepingFloats(json) });
    } else if (message.role === 'tool') {
      const previous = turns.at(-1);
      if (previous?.role === 'observation') previous.content = `${previous.content}\n${message.content}`;
      else turns.push({ role: 'observation', content: message.content });
    } else turns.push({ role: message.role, content: message.content });
  }
  const folded = foldSystemMessages(turns, new Set(['user', 'observation']), notes);
  // user/observation on odd positions, assistant/function_call on even ones, ending with the model.
  const userSide = new Set(['user', 'observation']);
  const alternates =
    folded.turns.length % 2 === 0 && folded.turns.every((turn, index) => userSide.has(turn.role) === (index % 2 === 0));
  if (!alternates) notes.skipped = 'turns do not alternate between user/tool and assistant';
  return { messages: folded.turns, ...(folded.system !== undefined ? { system: folded.system } : {}) };
}

/**
 * One conversation in one export format without its `tools` and lineage fields, which always come
 * last in a record: the part of the record a conversation's copies share that depends on more
 * than its tools list.
 */
export function exportBody(
  format: ExportFormat,
  conversation: ExportContent,
): { body: ExportRecord; notes: ExportNotes } {
  const notes: ExportNotes = { foldedSystemMessages: 0, droppedCallText: 0 };
  const body =
    format === 'openai'
      ? { messages: openAiMessages(conversation.messages) }
      : format === 'ms-swift'
        ? msSwiftRecord(conversation, notes)
        : llamaFactoryRecord(conversation, notes);
  return { body, notes };
}

/** One conversation in one export format, with its lineage fields. */
export function exportRecord(
  format: ExportFormat,
  conversation: ExportConversation,
): { record: ExportRecord; notes: ExportNotes } {
  const { body, notes } = exportBody(format, conversation);
  return {
    record: {
      ...body,
      tools: toolsJson(conversation.tools),
      id: conversation.id,
      source_id: conversation.sourceId,
      task_id: conversation.taskId,
      folded_hook_messages: conversation.foldedHookMessages ?? 0,
    },
    notes,
  };
}

/**
 * The JSONL line of a record in pieces, from the UTF-8 JSON bytes of its body (exportBodyJson) and
 * of its tools as a JSON string literal: concatenated they are exactly
 * `exportBodyJson(exportRecord(...).record)` (a body always has `messages`, and its keys never
 * include the ones added after it), so parts serialize each body once and the fan-in only adds
 * the tools and each copy's lineage, without decoding anything.
 */
export function exportLinePieces(body: Uint8Array, toolsLiteral: Uint8Array, lineage: Uint8Array): Uint8Array[] {
  return [body.subarray(0, body.length - 1), toolsKey, toolsLiteral, lineage];
}

/**
 * The end of a record's line after its tools: its lineage fields, `folded_hook_messages` (hook
 * system messages the target template's rendering folded into neighbouring turns, 0 when none)
 * and the closing brace (one per copy, for every format).
 */
export function lineageSuffix(lineage: {
  id: string;
  sourceId: string;
  taskId: string;
  foldedHookMessages?: number;
}): Buffer {
  return Buffer.from(
    `,"id":${JSON.stringify(lineage.id)},"source_id":${JSON.stringify(lineage.sourceId)},"task_id":${JSON.stringify(lineage.taskId)},"folded_hook_messages":${lineage.foldedHookMessages ?? 0}}`,
  );
}

const toolsKey = Buffer.from(',"tools":');
const messagesKey = Buffer.from('{"messages":');

/**
 * verl's `messages` column (the JSON text of openAiMessages) cut from the openai body's bytes,
 * `{"messages":<messages>}`, as a copy: the body is a slice of a 256 KiB decompressed chunk, and
 * the fan-in holds up to 8,192 rows per split until their Parquet file is written, so slices kept
 * whole chunks alive (~680 MB at 100,000 tasks, about 4x the rows' own bytes).
 */
export function verlMessagesOf(openAiBody: Buffer): Buffer {
  if (openAiBody.indexOf(messagesKey) !== 0 || openAiBody[openAiBody.length - 1] !== 0x7d)
    throw new Error('not the JSON text of an openai export body');
  return Buffer.from(openAiBody.subarray(messagesKey.length, openAiBody.length - 1));
}

/** LLaMA-Factory's dataset_info.json entries for the llama-factory files (keys: dataset names). */
export function llamaFactoryDatasetInfo(files: Record<string, string>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(files).map(([name, file]) => [
      name,
      {
        file_name: file,
        formatting: 'sharegpt',
        columns: { messages: 'messages', system: 'system', tools: 'tools' },
        tags: {
          role_tag: 'role',
          content_tag: 'content',
          user_tag: 'user',
          assistant_tag: 'assistant',
          observation_tag: 'observation',
          function_tag: 'function_call',
          system_tag: 'system',
        },
      },
    ]),
  );
}
