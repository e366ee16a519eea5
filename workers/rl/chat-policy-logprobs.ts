import { errorCodeOf } from '../../shared/errors';
import { modelErrorCodes } from '../../shared/models/model-errors';
import { withChat, type ModelClient } from '../../shared/models/model-client';
import type { LogprobDistribution } from '../../shared/models/token-exact/logprob-distribution';
import type { Trajectory } from '../../shared/trajectory/trajectory';

/**
 * rl policies on chat-completions endpoints (hosted APIs, vLLM's or `hat serve`'s
 * `/v1/chat/completions`): not token-exact (records re-tokenize the conversation), but every call
 * asks for the generated tokens' logprobs (`logprobs: true`; OpenAI's
 * `choices[].logprobs.content[]` with token, logprob and bytes, streamed or not), kept per
 * assistant turn with the distribution they are of. An endpoint that refuses the field (a 400
 * naming logprobs) is asked again without it, once, and not asked again; one that omits them
 * leaves those turns without logprobs. Either is recorded and counted, never fatal.
 */
export class ChatLogprobsRequester {
  /** The endpoint's message when it refused `logprobs` (then no call asks for them any more). */
  refusal: string | undefined;

  /** The client, asking for logprobs on every call. */
  wrap(client: ModelClient): ModelClient {
    return withChat(client, async (request) => {
      if (this.refusal !== undefined) return client.chat(request);
      try {
        return await client.chat({ ...request, logprobs: true });
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        if (errorCodeOf(error) !== modelErrorCodes.badRequest || !/logprob/i.test(message)) throw error;
        const response = await client.chat(request);
        this.refusal ??= message;
        return response;
      }
    });
  }
}

/** `metadata.chat_logprobs` of a chat policy's episode record. */
export interface ChatLogprobsMetadata {
  /** What the logprobs are of (the rl config's `chatLogprobsMode` at the sampling settings). */
  logprob_distribution: LogprobDistribution;
  /** Per assistant turn (model call) that came with logprobs: the tokens as the API named them and their logprobs (bytes when given). */
  turns: Array<{ message_index: number; tokens: string[]; logprobs: number[]; bytes?: number[][] }>;
  /** Model calls whose response carried no logprobs. */
  missing_turns: number;
  /** The endpoint refused `logprobs: true` (its message); no turn has logprobs. */
  refused?: string;
}

export function chatLogprobsMetadata(
  trajectory: Trajectory,
  distribution: LogprobDistribution,
  refusal: string | undefined,
): ChatLogprobsMetadata {
  const turns = trajectory.calls.flatMap((call) => {
    if (!call.logprobs) return [];
    const bytes = call.logprobs.every((entry) => entry.bytes !== undefined)
      ? call.logprobs.map((entry) => entry.bytes!)
      : undefined;
    return [
      {
        message_index: call.messageIndex,
        tokens: call.logprobs.map((entry) => entry.token),
        logprobs: call.logprobs.map((entry) => Math.fround(entry.logprob)),
        ...(bytes ? { bytes } : {}),
      },
    ];
  });
  return {
    logprob_distribution: distribution,
    turns,
    missing_turns: trajectory.calls.length - turns.length,
    ...(refusal !== undefined ? { refused: refusal } : {}),
  };
}

/** Chat policies: how many turns came with logprobs (stats.json `chatLogprobs`). */
export interface ChatLogprobsTotals {
  episodes: number;
  turns: number;
  turnsWithLogprobs: number;
  tokens: number;
  /** Episodes played after the endpoint refused `logprobs` (none of their turns has any). */
  refusedEpisodes: number;
}

export function addChatLogprobs(
  into: ChatLogprobsTotals | undefined,
  metadata: ChatLogprobsMetadata,
): ChatLogprobsTotals {
  const totals = into ?? { episodes: 0, turns: 0, turnsWithLogprobs: 0, tokens: 0, refusedEpisodes: 0 };
  totals.episodes += 1;
  totals.turns += metadata.turns.length + metadata.missing_turns;
  totals.turnsWithLogprobs += metadata.turns.length;
  totals.tokens += metadata.turns.reduce((sum, turn) => sum + turn.logprobs.length, 0);
  if (metadata.refused !== undefined) totals.refusedEpisodes += 1;
  return totals;
}
