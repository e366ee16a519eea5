import { z } from 'zod';
import type { ChatMessage, ToolCall, ToolSpec } from '../shared/trajectory/messages';
import { chatMessageSchema } from '../shared/trajectory/messages';
import type { ToolCallParser, ToolCallParseResult } from '../shared/text/tool-parsers';
import { chatPromptIds } from './chat-prompt';
import { checkModelName, usageOf } from './completions-handler';
import { parseBody, samplingFieldsSchema, samplingSettingsOf } from './request-fields';
import { minimumLogprob, runGeneration, type ServeContext, type ServedToken } from './serve-engine';
import { ServeRequestError } from './serve-errors';
import type { SseWriter } from './sse-writer';
import { ToolCallStreamGate } from './tool-call-stream-gate';

const contentSchema = z.union([
  z.string(),
  z.array(z.object({ type: z.string(), text: z.string().optional() }).loose()),
  z.null(),
]);

/** vLLM's ChatCompletionRequest, the fields `hat serve` implements. */
export const chatCompletionRequestSchema = samplingFieldsSchema.extend({
  messages: z.array(z.object({ role: z.string(), content: contentSchema.optional() }).loose()).min(1),
  tools: z
    .array(
      z.object({
        type: z.literal('function').default('function'),
        function: z
          .object({
            name: z.string().min(1),
            description: z.string().nullish(),
            parameters: z.record(z.string(), z.unknown()).nullish(),
          })
          .loose(),
      }),
    )
    .nullish(),
  tool_choice: z
    .union([
      z.enum(['none', 'auto', 'required']),
      z.object({ type: z.literal('function').optional(), function: z.object({ name: z.string() }) }),
    ])
    .nullish(),
  max_tokens: z.number().int().min(1).nullish(),
  max_completion_tokens: z.number().int().min(1).nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: z.number().int().min(0).nullish(),
  add_generation_prompt: z.boolean().nullish(),
  chat_template_kwargs: z.record(z.string(), z.unknown()).nullish(),
  return_token_ids: z.boolean().nullish(),
});
type ChatCompletionRequest = z.infer<typeof chatCompletionRequestSchema>;

/** Messages in the project's shape: text parts joined, checked per role. */
function chatMessagesOf(messages: ChatCompletionRequest['messages']): ChatMessage[] {
  return messages.map((message, index) => {
    const content = Array.isArray(message.content)
      ? message.content.map((part) => (part.type === 'text' ? (part.text ?? '') : '')).join('')
      : message.content;
    const parsed = chatMessageSchema.safeParse({
      ...message,
      content: content ?? (message.role === 'assistant' ? null : ''),
    });
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new ServeRequestError(
        400,
        `messages[${index}].${issue.path.join('.')}: ${issue.message}`,
        `messages.${index}`,
      );
    }
    return parsed.data;
  });
}

let chatCounter = 0;

/** `POST /v1/chat/completions`: renders with the model's template, generates, parses tool calls; streams SSE when `stream` is set. */
export async function handleChatCompletion(
  context: ServeContext,
  body: unknown,
  sse: () => SseWriter,
  signal: AbortSignal,
): Promise<unknown> {
  const request = parseBody(chatCompletionRequestSchema, body);
  checkModelName(context, request.model);
  if ((request.n ?? 1) !== 1)
    throw new ServeRequestError(400, 'hat serve samples one sequence per request: n must be 1', 'n');
  const toolChoice = request.tool_choice ?? (request.tools && request.tools.length > 0 ? 'auto' : 'none');
  if (toolChoice !== 'none' && toolChoice !== 'auto') {
    throw new ServeRequestError(
      400,
      'hat serve has no guided decoding: tool_choice must be "auto" or "none"',
      'tool_choice',
    );
  }
  if ((request.top_logprobs ?? 0) > 0 && request.logprobs !== true)
    throw new ServeRequestError(400, 'when using `top_logprobs`, `logprobs` must be set to true.', 'top_logprobs');
  if ((request.top_logprobs ?? 0) > context.maxLogprobs) {
    throw new ServeRequestError(
      400,
      `Requested sample logprobs of ${request.top_logprobs}, which is greater than max allowed: ${context.maxLogprobs}`,
      'top_logprobs',
    );
  }
  const messages = chatMessagesOf(request.messages);
  const tools: ToolSpec[] | undefined = request.tools?.map((tool) => ({
    type: 'function',
    function: {
      name: tool.function.name,
      ...(tool.function.description ? { description: tool.function.description } : {}),
      parameters: tool.function.parameters ?? {},
    },
  }));
  const promptIds = chatPromptIds(
    context,
    messages,
    tools,
    request.add_generation_prompt ?? true,
    request.chat_template_kwargs,
  );
  const maxModelLength = context.served.maxModelLength;
  const maxTokens =
    request.max_completion_tokens ??
    request.max_tokens ??
    (maxModelLength === null ? 256 : Math.max(1, maxModelLength - promptIds.length));
  const parser = toolChoice === 'auto' && tools && tools.length > 0 ? context.toolParser : null;
  const wantsLogprobs = request.logprobs === true;
  const topLogprobs = request.top_logprobs ?? 0;
  const asTokenIds = request.return_tokens_as_token_ids === true;
  const returnTokenIds = request.return_token_ids === true;
  const id = `chatcmpl-${Date.now().toString(36)}${(chatCounter++).toString(36)}`;
  const created = Math.floor(Date.now() / 1000);
  const modelId = context.served.modelId;
  const logprobsOf = (tokens: ServedToken[]): { content: unknown[] } => ({
    content: tokens.map((token) => chatLogprob(context, token, topLogprobs, asTokenIds)),
  });

  const stream = request.stream === true ? sse() : undefined;
  const gate = new ToolCallStreamGate(parser);
  let pending: ServedToken[] = [];
  /** The content the last token released: it goes out with the finish reason, as vLLM sends it. */
  let lastContent = '';
  // vLLM writes each chunk with exclude_unset: a chunk holds the fields its serving code sets.
  const chunk = (choice: Record<string, unknown>, fields: Record<string, unknown> = {}): Record<string, unknown> => ({
    id,
    object: 'chat.completion.chunk',
    created,
    model: modelId,
    choices: [{ index: 0, ...choice }],
    ...fields,
  });
  /** The choice of a chunk for the tokens generated since the last one (their logprobs and ids). */
  const tokensChoice = (tokens: ServedToken[]) => ({
    logprobs: wantsLogprobs && tokens.length > 0 ? logprobsOf(tokens) : null,
    ...(returnTokenIds ? { token_ids: tokens.map((token) => token.tokenId) } : { token_ids: null }),
  });
  if (stream)
    stream.send(
      chunk(
        { delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null },
        { prompt_token_ids: returnTokenIds ? promptIds : null },
      ),
    );
  const generation = await runGeneration(context, {
    promptIds,
    maxTokens,
    ...samplingSettingsOf(context, request),
    topLogprobs,
    signal,
    onToken: stream
      ? ({ delta, token, last }) => {
          pending.push(token);
          const content = gate.push(delta);
          if (last) {
            lastContent = content;
            return;
          }
          // Tokens not visible yet ride with the next chunk; inside a held tool call each token goes
          // out with an empty delta when its logprobs or ids were asked for, as vLLM sends them.
          if (content === '' && (!(wantsLogprobs || returnTokenIds) || !gate.holding)) return;
          stream.send(
            chunk({ delta: content === '' ? {} : { content }, ...tokensChoice(pending), finish_reason: null }),
          );
          pending = [];
        }
      : undefined,
  });

  const { parsed, finishReason, hatFields } = assistantOutput(generation.text, generation.finishReason, parser, tools);
  if (stream) {
    const remainder = lastContent + (parser ? gate.remainder(parsed.content) : gate.push(''));
    // What the reply still holds after the streamed content: the rest of the content, then its
    // calls; the last of these goes out in the finishing chunk with the tokens not sent yet.
    const deltas = [...(remainder === '' ? [] : [{ content: remainder }]), ...toolCallDeltas(parsed.toolCalls)];
    const last = { ...(deltas.pop() ?? { content: '' }), ...hatFields };
    for (const delta of deltas) stream.send(chunk({ delta, ...tokensChoice([]), finish_reason: null }));
    stream.send(
      chunk({ delta: last, ...tokensChoice(pending), finish_reason: finishReason, stop_reason: generation.stopReason }),
    );
    if (request.stream_options?.include_usage === true) {
      // vLLM writes this chunk with exclude_none: a null prompt_tokens_details is left out.
      const { prompt_tokens_details: _, ...usage } = usageOf([generation]);
      stream.send({ id, object: 'chat.completion.chunk', created, model: modelId, choices: [], usage });
    }
    stream.done();
    return undefined;
  }
  return {
    id,
    object: 'chat.completion',
    created,
    model: modelId,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: parsed.content,
          refusal: null,
          annotations: null,
          audio: null,
          function_call: null,
          // Left out when empty, as current vLLM does (0.10-0.11 sent []).
          ...(parsed.toolCalls.length > 0 ? { tool_calls: parsed.toolCalls } : {}),
          // Both names (vLLM 0.11.1-0.15 sent both): null, hat serve has no reasoning parser.
          reasoning: null,
          reasoning_content: null,
          ...hatFields,
        },
        logprobs: wantsLogprobs ? logprobsOf(generation.tokens) : null,
        finish_reason: finishReason,
        stop_reason: generation.stopReason,
        token_ids: returnTokenIds ? generation.tokenIds : null,
      },
    ],
    service_tier: null,
    system_fingerprint: null,
    usage: usageOf([generation]),
    prompt_logprobs: null,
    prompt_token_ids: returnTokenIds ? promptIds : null,
    kv_transfer_params: null,
  };
}

/**
 * A reply's tool calls as vLLM's tool parsers stream them (hermes, llama3_json, qwen3_coder): per
 * call a delta with its index, id, type and name, then one with its arguments (vLLM may cut the
 * arguments into several; hat serve holds a call until it is parsed whole and sends them at once).
 */
export function toolCallDeltas(calls: readonly ToolCall[]): Array<Record<string, unknown>> {
  return calls.flatMap((call, index) => [
    { tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.function.name } }] },
    { tool_calls: [{ index, function: { arguments: call.function.arguments } }] },
  ]);
}

/**
 * The assistant message parts of a generated text: with a parser, content and tool calls split
 * by it (finish_reason `tool_calls` when a call ended the turn, as vLLM) and malformed calls
 * listed in the non-standard `hat_malformed_tool_calls`; without one, the text is the content.
 */
export function assistantOutput(
  text: string,
  generationFinish: 'stop' | 'length',
  parser: ToolCallParser | null,
  tools: ToolSpec[] | undefined,
): {
  parsed: ToolCallParseResult;
  finishReason: 'stop' | 'length' | 'tool_calls';
  hatFields: { hat_malformed_tool_calls?: ToolCallParseResult['malformed'] };
} {
  if (!parser)
    return { parsed: { content: text, toolCalls: [], malformed: [] }, finishReason: generationFinish, hatFields: {} };
  const parsed = parser.parse(text, { tools });
  return {
    parsed,
    finishReason: parsed.toolCalls.length > 0 && generationFinish === 'stop' ? 'tool_calls' : generationFinish,
    hatFields: parsed.malformed.length > 0 ? { hat_malformed_tool_calls: parsed.malformed } : {},
  };
}

/** One entry of `logprobs.content`: the token, its logprob, UTF-8 bytes, and the most likely alternatives. */
function chatLogprob(
  context: ServeContext,
  token: ServedToken,
  topLogprobs: number,
  asTokenIds: boolean,
): Record<string, unknown> {
  const entry = (tokenId: number, logprob: number): { token: string; logprob: number; bytes: number[] } => {
    const text = context.served.model.tokenizer.tokenText(tokenId);
    return {
      token: asTokenIds ? `token_id:${tokenId}` : text,
      logprob: Math.max(logprob, minimumLogprob),
      bytes: [...Buffer.from(text, 'utf8')],
    };
  };
  return {
    ...entry(token.tokenId, token.logprob),
    top_logprobs: token.top.slice(0, topLogprobs).map((candidate) => entry(candidate.tokenId, candidate.logprob)),
  };
}
