import { z } from 'zod';
import type { ChatMessage, ToolSpec } from '../shared/trajectory/messages';
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
  const id = `chatcmpl-${Date.now().toString(36)}${(chatCounter++).toString(36)}`;
  const created = Math.floor(Date.now() / 1000);
  const modelId = context.served.modelId;
  const chunk = (delta: Record<string, unknown>, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
    id,
    object: 'chat.completion.chunk',
    created,
    model: modelId,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: null, stop_reason: null, ...extra }],
  });
  const logprobsOf = (tokens: ServedToken[]): { content: unknown[] } => ({
    content: tokens.map((token) => chatLogprob(context, token, topLogprobs, asTokenIds)),
  });

  const stream = request.stream === true ? sse() : undefined;
  const gate = new ToolCallStreamGate(parser);
  let pending: ServedToken[] = [];
  if (stream) stream.send(chunk({ role: 'assistant', content: '' }));
  const generation = await runGeneration(context, {
    promptIds,
    maxTokens,
    ...samplingSettingsOf(context, request),
    topLogprobs,
    signal,
    onToken: stream
      ? ({ delta, token }) => {
          pending.push(token);
          const content = gate.push(delta);
          // Logprobs of tokens not visible yet ride with the next chunk; inside a held tool call each token goes out with empty content.
          if (content === '' && (!wantsLogprobs || !gate.holding)) return;
          stream.send(chunk({ content }, { logprobs: wantsLogprobs ? logprobsOf(pending) : null }));
          pending = [];
        }
      : undefined,
  });

  const { parsed, finishReason, hatFields } = assistantOutput(generation.text, generation.finishReason, parser, tools);
  if (stream) {
    const remainder = parser ? gate.remainder(parsed.content) : gate.push('');
    if (remainder !== '' || pending.length > 0)
      stream.send(
        chunk({ content: remainder }, { logprobs: wantsLogprobs && pending.length > 0 ? logprobsOf(pending) : null }),
      );
    if (parsed.toolCalls.length > 0) {
      stream.send(
        chunk({
          tool_calls: parsed.toolCalls.map((call, index) => ({
            index,
            id: call.id,
            type: 'function',
            function: { name: call.function.name, arguments: call.function.arguments },
          })),
        }),
      );
    }
    stream.send(
      chunk({ content: '', ...hatFields }, { finish_reason: finishReason, stop_reason: generation.stopReason }),
    );
    if (request.stream_options?.include_usage === true) {
      stream.send({
        id,
        object: 'chat.completion.chunk',
        created,
        model: modelId,
        choices: [],
        usage: usageOf([generation]),
      });
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
