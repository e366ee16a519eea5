import { z } from 'zod';
import { chatMessageSchema, toolSpecSchema } from '../shared/trajectory/messages';
import { chatPromptIds } from './chat-prompt';
import { checkModelName } from './completions-handler';
import { parseBody } from './request-fields';
import type { ServeContext } from './serve-engine';
import { ServeRequestError } from './serve-errors';

const tokenizeCompletionSchema = z.object({
  model: z.string().nullish(),
  prompt: z.string(),
  add_special_tokens: z.boolean().nullish(),
  return_token_strs: z.boolean().nullish(),
});

const tokenizeChatSchema = z.object({
  model: z.string().nullish(),
  messages: z.array(chatMessageSchema).min(1),
  tools: z.array(toolSpecSchema).nullish(),
  add_generation_prompt: z.boolean().nullish(),
  add_special_tokens: z.boolean().nullish(),
  return_token_strs: z.boolean().nullish(),
  chat_template_kwargs: z.record(z.string(), z.unknown()).nullish(),
});

const detokenizeSchema = z.object({ model: z.string().nullish(), tokens: z.array(z.number().int().min(0)) });

/**
 * `POST /tokenize`: a text prompt, or chat messages rendered with the model's template (with the
 * generation prompt unless `add_generation_prompt: false`), as vLLM answers it:
 * `{count, max_model_len, tokens, token_strs}`. Special tokens are never added on top of the
 * text (the chat template writes them; `add_special_tokens: true` is refused for text prompts of
 * tokenizers whose encoding would differ, which is none of the packaged ones).
 */
export function handleTokenize(context: ServeContext, body: unknown): unknown {
  const isChat = body !== null && typeof body === 'object' && 'messages' in body;
  const { model } = context.served;
  let tokens: number[];
  let returnStrings: boolean;
  if (isChat) {
    const request = parseBody(tokenizeChatSchema, body);
    checkModelName(context, request.model);
    tokens = chatPromptIds(
      context,
      request.messages,
      request.tools ?? undefined,
      request.add_generation_prompt ?? true,
      request.chat_template_kwargs,
    );
    returnStrings = request.return_token_strs === true;
  } else {
    const request = parseBody(tokenizeCompletionSchema, body);
    checkModelName(context, request.model);
    tokens = model.tokenizer.encode(request.prompt);
    returnStrings = request.return_token_strs === true;
  }
  return {
    count: tokens.length,
    max_model_len: context.served.maxModelLength,
    tokens,
    token_strs: returnStrings ? tokens.map((tokenId) => model.tokenizer.tokenText(tokenId)) : null,
  };
}

/** `POST /detokenize`: `{tokens}` to `{prompt}` (special tokens kept, as vLLM's detokenize does). */
export function handleDetokenize(context: ServeContext, body: unknown): unknown {
  const request = parseBody(detokenizeSchema, body);
  checkModelName(context, request.model);
  const vocabularySize = context.served.model.decoder.info.vocabularySize;
  const bad = request.tokens.find((tokenId) => tokenId >= vocabularySize);
  if (bad !== undefined)
    throw new ServeRequestError(400, `Token id ${bad} is out of vocabulary [0, ${vocabularySize})`, 'tokens');
  return { prompt: context.served.model.tokenizer.decode(request.tokens, { keepSpecialTokens: true }) };
}
