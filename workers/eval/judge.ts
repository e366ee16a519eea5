import { errorCodeOf } from '../../shared/errors';
import { sha256Hex } from '../../shared/hash/hash';
import type { ModelClient, SamplingSettings } from '../../shared/models/model-client';
import { JUDGE_RUBRIC_VERSION } from './eval-contract';

/** A versioned rubric: what the judge rates and how. Its hash is recorded with every judged score. */
export interface JudgeRubric {
  version: string;
  text: string;
}

/**
 * The built-in rubric for what rules cannot score in a live room: engagement, persuasion and
 * tone. Changing its text is changing the benchmark: bump the version with it.
 */
export const defaultJudgeRubric: JudgeRubric = {
  version: JUDGE_RUBRIC_VERSION,
  text: [
    'You rate one reply of a live-stream sales host (or assistant) to one viewer message.',
    'Rate the reply from 1 to 5 on the whole of:',
    '- engagement: it answers the viewer directly and keeps the conversation going;',
    '- persuasion: it gives a concrete, honest reason to buy or to stay, without pressure;',
    '- tone: warm, brief and natural, as a good host speaks.',
    '1 = unusable, 2 = poor, 3 = acceptable, 4 = good, 5 = excellent.',
    'Item-specific criteria, when given, come first.',
    'Answer with one JSON object and nothing else: {"score": <1-5>, "reason": "<one sentence>"}',
  ].join('\n'),
};

export function rubricHash(rubric: JudgeRubric): string {
  return sha256Hex(`${rubric.version}\n${rubric.text}`);
}

/** A judged score: `score` 0–100 (rating 1–5 mapped linearly), or missing with why. */
export interface JudgeVerdict {
  score: number | null;
  rating?: number;
  reason?: string;
  missing: boolean;
  error?: string;
}

/** Reads the rating from a judge's answer: a JSON object with `score`, else a `score: N` phrase. */
export function parseJudgeRating(text: string): { rating: number; reason?: string } | undefined {
  const json = /\{[\s\S]*\}/.exec(text)?.[0];
  if (json) {
    try {
      const value = JSON.parse(json) as { score?: unknown; reason?: unknown };
      const rating = Number(value.score);
      if (Number.isFinite(rating) && rating >= 1 && rating <= 5)
        return { rating, ...(typeof value.reason === 'string' ? { reason: value.reason } : {}) };
    } catch {
      // Not JSON after all: try the phrase below.
    }
  }
  const phrase = /score\W{0,3}([1-5](?:\.\d+)?)/i.exec(text);
  return phrase ? { rating: Number(phrase[1]) } : undefined;
}

/**
 * Asks the judge for one pointwise rating. Never throws: a judge that is down or answers
 * nonsense leaves the verdict missing (rule scores are untouched), with the reason recorded.
 */
export async function judgeResponse(options: {
  client: ModelClient;
  rubric: JudgeRubric;
  prompt: string;
  response: string;
  itemRubric?: string;
  sampling: SamplingSettings;
  signal?: AbortSignal;
}): Promise<JudgeVerdict> {
  const user = [
    ...(options.itemRubric ? [`Item-specific criteria:\n${options.itemRubric}`, ''] : []),
    `Viewer message / prompt:\n${options.prompt}`,
    '',
    `Reply to rate:\n${options.response}`,
  ].join('\n');
  try {
    const answer = await options.client.chat({
      messages: [
        { role: 'system', content: options.rubric.text },
        { role: 'user', content: user },
      ],
      ...options.sampling,
      ...(options.signal ? { signal: options.signal } : {}),
    });
    const parsed = parseJudgeRating(answer.message.content ?? '');
    if (!parsed)
      return {
        score: null,
        missing: true,
        error: `[JUDGE_UNPARSABLE] the judge's answer has no 1-5 score: ${JSON.stringify((answer.message.content ?? '').slice(0, 120))}`,
      };
    return {
      score: ((parsed.rating - 1) / 4) * 100,
      rating: parsed.rating,
      ...(parsed.reason ? { reason: parsed.reason } : {}),
      missing: false,
    };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return { score: null, missing: true, error: errorCodeOf(error) ? message : `[JUDGE_UNAVAILABLE] ${message}` };
  }
}
