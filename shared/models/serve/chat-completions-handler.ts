import { z } from 'zod';
import type { ChatMessage, ToolSpec } from '../../trajectory/messages';
import { chatMessageSchema } from '../../trajectory/messages';
import type { ToolCallParseResult } from '../../text/tool-parsers';
import { checkModelName, usageOf } from './completions-handler';
import { parseBody, samplingFieldsSchema, stopList } from './request-fields';
import { minimumLogprob, runGeneration, type ServeContext, type ServedToken } from './serve-engine';
import { ServeRequestError } from './serve-errors';
import type { SseWriter } from './sse-writer';

const contentSchema = z.union([z.string(), z.array(z.object({ type: z.string(), text: z.string().optional() }).loose()), z.null()]);

/** vLLM's ChatCompletionRequest, the fields `hat serve` implements. */
export const chatCompletionRequestSchema = samplingFieldsSchema.extend({
  messages: z.array(z.object({ role: z.string(), content: contentSchema.optional() }).loose()).min(1),
  tools: z
    .array(
      z.object({
        type: z.literal('function').default('function'),
        function: z.object({ name: z.string().min(1), description: z.string().nullish(), parameters: z.record(z.string(), z.unknown()).nullish() }).loose(),
      }),
    )
    .nullish(),
  tool_choice: z.union([z.enum(['none', 'auto', 'required']), z.object({ type: z.literal('function').optional(), function: z.object({ name: z.string() }) })]).nullish(),
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
    const content = Array.isArray(message.content) ? message.content.map((part) => (part.type === 'text' ? (part.text ?? '') : '')).join('') : message.content;
    const parsed = chatMessageSchema.safeParse({ ...message, content: content ?? (message.role === 'assistant' ? null : '') });
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      throw new ServeRequestError(400, `messages[${index}].${issue.path.join('.')}: ${issue.message}`, `messages.${index}`);
    }
    return parsed.data;
  });
}

let chatCounter = 0;

/** `POST /v1/chat/completions`: renders with the model's template, generates, parses tool calls; streams SSE when `stream` is set. */
export async function handleChatCompletion(context: ServeContext, body: unknown, sse: () => SseWriter, signal: AbortSignal): Promise<unknown> {
  const request = parseBody(chatCompletionRequestSchema, body);
  checkModelName(context, request.model);
  if ((request.n ?? 1) !== 1) throw new ServeRequestError(400, 'hat serve samples one sequence per request: n must be 1', 'n');
  if (request.chat_template_kwargs && Object.keys(request.chat_template_kwargs).length > 0) {
    throw new ServeRequestError(400, 'hat serve renders the template with messages, tools and add_generation_prompt only; drop chat_template_kwargs', 'chat_template_kwargs');
  }
  const toolChoice = request.tool_choice ?? (request.tools && request.tools.length > 0 ? 'auto' : 'none');
  if (toolChoice !== 'none' && toolChoice !== 'auto') {
    throw new ServeRequestError(400, 'hat serve has no guided decoding: tool_choice must be "auto" or "none"', 'tool_choice');
  }
  if ((request.top_logprobs ?? 0) > 0 && request.logprobs !== true) throw new ServeRequestError(400, 'when using `top_logprobs`, `logprobs` must be set to true.', 'top_logprobs');
  if ((request.top_logprobs ?? 0) > context.maxLogprobs) {
    throw new ServeRequestError(400, `Requested sample logprobs of ${request.top_logprobs}, which is greater than max allowed: ${context.maxLogprobs}`, 'top_logprobs');
  }
  const messages = chatMessagesOf(request.messages);
  const tools: ToolSpec[] | undefined = request.tools?.map((tool) => ({
    type: 'function',
    function: { name: tool.function.name, ...(tool.function.description ? { description: tool.function.description } : {}), parameters: tool.function.parameters ?? {} },
  }));
  const { model } = context.served;
  let promptIds: number[];
  try {
    promptIds = model.tokenizer.encode(model.renderer.render(messages, { tools, addGenerationPrompt: request.add_generation_prompt ?? true }));
  } catch (error) {
    throw new ServeRequestError(400, `the chat template failed to render these messages: ${(error as Error).message}`, 'messages');
  }
  const maxModelLength = context.served.maxModelLength;
  const maxTokens = request.max_completion_tokens ?? request.max_tokens ?? (maxModelLength === null ? 256 : Math.max(1, maxModelLength - promptIds.length));
  const parser = toolChoice === 'auto' && tools && tools.length > 0 ? context.toolParser : null;
  const wantsLogprobs = request.logprobs === true;
  const topLogprobs = request.top_logprobs ?? 0;
  const asTokenIds = request.return_tokens_as_token_ids === true;
  const id = `chatcmpl-${Date.now().toString(36)}${(chatCounter++).toString(36)}`;
  const created = Math.floor(Date.now() / 1000);
  const modelId = context.served.modelId;
  const chunk = (delta: Record<string, unknown>, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
    id,
    object: 'chat.completion.chunk',
    created,
    model: modelId,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: null, stop_reason: null, ...extra }],
    usage: null,
  });
  const logprobsOf = (tokens: ServedToken[]): { content: unknown[] } => ({ content: tokens.map((token) => chatLogprob(context, token, topLogprobs, asTokenIds)) });

  const stream = request.stream === true ? sse() : undefined;
  let streamedText = '';
  let pending: ServedToken[] = [];
  let heldFrom: number | undefined;
  let fullText = '';
  if (stream) stream.send(chunk({ role: 'assistant', content: '' }));
  const generation = await runGeneration(context, {
    promptIds,
    maxTokens,
    temperature: request.temperature ?? 1,
    topP: request.top_p ?? 1,
    topK: request.top_k ?? 0,
    seed: request.seed ?? undefined,
    topLogprobs,
    stop: stopList(request.stop),
    stopTokenIds: request.stop_token_ids ?? [],
    ignoreEos: request.ignore_eos === true,
    includeStopStringInOutput: request.include_stop_str_in_output === true,
    signal,
    onToken: stream
      ? ({ delta, token }) => {
          pending.push(token);
          fullText += delta;
          // With a tool parser, content stops streaming where a call may begin; the rest goes out parsed at the end.
          heldFrom ??= parser ? callStart(fullText, parser.startMarkers, parser.callsOnlyAtStart === true) : undefined;
          const visibleEnd = heldFrom ?? (parser ? safeEnd(fullText, parser.startMarkers, parser.callsOnlyAtStart === true) : fullText.length);
          const contentDelta = fullText.slice(streamedText.length, Math.max(streamedText.length, visibleEnd));
          // Logprobs of tokens not visible yet ride with the next chunk; inside a held tool call each token goes out with empty content.
          if (contentDelta === '' && (!wantsLogprobs || heldFrom === undefined)) return;
          streamedText += contentDelta;
          stream.send(chunk({ content: contentDelta }, { logprobs: wantsLogprobs ? logprobsOf(pending) : null }));
          pending = [];
        }
      : undefined,
  });

  const parsed: ToolCallParseResult = parser ? parser.parse(generation.text, { tools }) : { content: generation.text, toolCalls: [], malformed: [] };
  const finishReason = parsed.toolCalls.length > 0 && generation.finishReason === 'stop' ? 'tool_calls' : generation.finishReason;
  const hatFields = parser && parsed.malformed.length > 0 ? { hat_malformed_tool_calls: parsed.malformed } : {};
  if (stream) {
    const streamedContent = streamedText.trim();
    const remainder = parsed.content === null ? '' : parsed.content.startsWith(streamedContent) ? parsed.content.slice(streamedContent.length) : parsed.content;
    if (remainder !== '' || pending.length > 0) stream.send(chunk({ content: remainder }, { logprobs: wantsLogprobs && pending.length > 0 ? logprobsOf(pending) : null }));
    if (parsed.toolCalls.length > 0) {
      stream.send(chunk({ tool_calls: parsed.toolCalls.map((call, index) => ({ index, id: call.id, type: 'function', function: { name: call.function.name, arguments: call.function.arguments } })) }));
    }
    stream.send(chunk({ content: '', ...hatFields }, { finish_reason: finishReason, stop_reason: generation.stopReason }));
    if (request.stream_options?.include_usage === true) {
      stream.send({ id, object: 'chat.completion.chunk', created, model: modelId, choices: [], usage: usageOf([generation]) });
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
          content: parser ? parsed.content : generation.text,
          refusal: null,
          annotations: null,
          audio: null,
          function_call: null,
          tool_calls: parsed.toolCalls,
          reasoning_content: null,
          ...hatFields,
        },
        logprobs: wantsLogprobs ? logprobsOf(generation.tokens) : null,
        finish_reason: finishReason,
        stop_reason: generation.stopReason,
        ...(request.return_token_ids === true ? { token_ids: generation.tokenIds } : {}),
      },
    ],
    service_tier: null,
    system_fingerprint: null,
    usage: usageOf([generation]),
    prompt_logprobs: null,
    ...(request.return_token_ids === true ? { prompt_token_ids: promptIds } : {}),
    kv_transfer_params: null,
  };
}

/** One entry of `logprobs.content`: the token, its logprob, UTF-8 bytes, and the most likely alternatives. */
function chatLogprob(context: ServeContext, token: ServedToken, topLogprobs: number, asTokenIds: boolean): Record<string, unknown> {
  const entry = (tokenId: number, logprob: number): { token: string; logprob: number; bytes: number[] } => {
    const text = context.served.model.tokenizer.tokenText(tokenId);
    return { token: asTokenIds ? `token_id:${tokenId}` : text, logprob: Math.max(logprob, minimumLogprob), bytes: [...Buffer.from(text, 'utf8')] };
  };
  return { ...entry(token.tokenId, token.logprob), top_logprobs: token.top.slice(0, topLogprobs).map((candidate) => entry(candidate.tokenId, candidate.logprob)) };
}

/** Where a tool call begins in streamed text, if one has. */
function callStart(text: string, markers: readonly string[], onlyAtStart: boolean): number | undefined {
  if (onlyAtStart) {
    const trimmed = text.trimStart();
    if (trimmed === '') return undefined;
    return markers.some((marker) => trimmed.startsWith(marker)) ? 0 : undefined;
  }
  const found = markers.map((marker) => text.indexOf(marker)).filter((index) => index >= 0);
  return found.length > 0 ? Math.min(...found) : undefined;
}

/** How much of the text can stream: all but a tail that could still grow into a marker (or all whitespace, for start-only formats). */
function safeEnd(text: string, markers: readonly string[], onlyAtStart: boolean): number {
  if (onlyAtStart) return text.trim() === '' ? 0 : text.length;
  let end = text.length;
  for (const marker of markers) {
    for (let length = Math.min(marker.length - 1, text.length); length > 0; length--) {
      if (text.endsWith(marker.slice(0, length))) {
        end = Math.min(end, text.length - length);
        break;
      }
    }
  }
  return end;
}
