import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { remoteScorerConfigSchema } from './scoring-endpoint';
import { completionScoresFromSglang, sglangInputLogprobsOf, sglangScoringRequest } from './sglang-generate-logprobs';
import {
  completionScoresFromVllm,
  vllmPromptLogprobsOf,
  vllmScoringRequest,
  VllmTokenScorer,
} from './vllm-prompt-logprobs';

const url = 'http://teacher:8000/v1/completions';

/** A vLLM answer for prompt [11, 12, 13]: position 2's own token ranks 5th, outside the top 2. */
const vllmBody = {
  id: 'cmpl-1',
  object: 'text_completion',
  choices: [
    {
      index: 0,
      text: ' x',
      logprobs: null,
      finish_reason: 'length',
      prompt_logprobs: [
        null,
        { '12': { logprob: -0.5, rank: 1, decoded_token: 'b' }, '40': { logprob: -1.5, rank: 2, decoded_token: 'q' } },
        {
          '13': { logprob: -4.25, rank: 5, decoded_token: 'c' },
          '7': { logprob: -0.75, rank: 1, decoded_token: 'g' },
          '8': { logprob: -1.0, rank: 2, decoded_token: 'h' },
        },
      ],
    },
  ],
};

describe('vLLM prompt_logprobs', () => {
  it('asks for token-id prompts with prompt_logprobs and max_tokens 1 (or echo without generation)', () => {
    expect(vllmScoringRequest('m', [1, 2], 4, false)).toEqual({
      model: 'm',
      prompt: [1, 2],
      temperature: 1,
      prompt_logprobs: 4,
      max_tokens: 1,
    });
    expect(vllmScoringRequest('m', [1, 2], 0, true)).toMatchObject({ echo: true, max_tokens: 0, prompt_logprobs: 0 });
  });

  it('reads the completion positions and the top-k without the scored token when it ranks below k', () => {
    const entries = vllmPromptLogprobsOf(vllmBody, 3, url);
    expect(completionScoresFromVllm(entries, { promptIds: [11], completionIds: [12, 13] }, 2, url)).toEqual({
      logprobs: [-0.5, -4.25],
      top: [
        [
          { tokenId: 12, logprob: -0.5 },
          { tokenId: 40, logprob: -1.5 },
        ],
        [
          { tokenId: 7, logprob: -0.75 },
          { tokenId: 8, logprob: -1.0 },
        ],
      ],
    });
    expect(completionScoresFromVllm(entries, { promptIds: [11, 12], completionIds: [13] }, 0, url)).toEqual({
      logprobs: [-4.25],
    });
  });

  it('refuses answers of another shape, naming the adapter to check', () => {
    expect(() => vllmPromptLogprobsOf({ choices: [{ text: 'x' }] }, 3, url)).toThrow(
      /\[SCORING_BAD_RESPONSE\].*prompt_logprobs is missing.*adapter: vllm matches the server/,
    );
    expect(() => vllmPromptLogprobsOf(vllmBody, 4, url)).toThrow(/3 positions for 4 prompt tokens/);
    expect(() =>
      completionScoresFromVllm(
        vllmPromptLogprobsOf(vllmBody, 3, url),
        { promptIds: [11], completionIds: [99, 13] },
        0,
        url,
      ),
    ).toThrow(/prompt_logprobs\[1\] has no entry for token id 99/);
  });
});

describe('SGLang input_token_logprobs', () => {
  const sglangBody = {
    text: '',
    output_ids: [],
    meta_info: {
      id: 'r1',
      finish_reason: { type: 'length', length: 0 },
      prompt_tokens: 3,
      input_token_logprobs: [
        [null, 11, null],
        [-0.5, 12, null],
        [-4.25, 13, null],
      ],
      input_top_logprobs: [
        null,
        [
          [-0.5, 12, null],
          [-1.5, 40, null],
        ],
        [
          [-0.75, 7, null],
          [-1.0, 8, null],
        ],
      ],
      output_token_logprobs: [],
    },
  };

  it('asks for input logprobs from the first token with no new tokens', () => {
    expect(sglangScoringRequest([1, 2], 3, true)).toEqual({
      input_ids: [1, 2],
      sampling_params: { max_new_tokens: 0, temperature: 1 },
      return_logprob: true,
      logprob_start_len: 0,
      top_logprobs_num: 3,
      return_text_in_logprobs: true,
    });
  });

  it('aligns positions from the end and reads the top-k triples', () => {
    const input = sglangInputLogprobsOf(sglangBody, [12, 13], url);
    expect(completionScoresFromSglang(input, { promptIds: [12], completionIds: [13] }, 2, url)).toEqual({
      logprobs: [-4.25],
      top: [
        [
          { tokenId: 7, logprob: -0.75 },
          { tokenId: 8, logprob: -1.0 },
        ],
      ],
    });
  });

  it('refuses positions that report other token ids or lack logprobs', () => {
    expect(() => sglangInputLogprobsOf(sglangBody, [11, 12, 14], url)).toThrow(
      /input position 2 reports token id 13, but 14 was sent/,
    );
    expect(() =>
      completionScoresFromSglang(
        sglangInputLogprobsOf(sglangBody, [11, 12, 13], url),
        { promptIds: [], completionIds: [11, 12, 13] },
        0,
        url,
      ),
    ).toThrow(/input position 0 \(token 11\) has no logprob/);
    expect(() => sglangInputLogprobsOf({ meta_info: {} }, [1], url)).toThrow(/adapter: sglang matches the server/);
  });
});

describe('scoring endpoint', () => {
  let server: http.Server;
  let answers: Array<{ status: number; body: unknown; headers?: Record<string, string> }>;
  let received: number;

  beforeEach(async () => {
    answers = [];
    received = 0;
    server = http.createServer((request, response) => {
      request.resume();
      request.on('end', () => {
        received++;
        const answer = answers.shift() ?? { status: 500, body: { message: 'no answer left' } };
        response.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers });
        response.end(JSON.stringify(answer.body));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  });

  afterEach(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  function scorer(): VllmTokenScorer {
    const { port } = server.address() as AddressInfo;
    return new VllmTokenScorer(
      remoteScorerConfigSchema.parse({
        baseUrl: `http://127.0.0.1:${port}/v1`,
        model: 'm',
        maxRetries: 2,
        retryInitialDelayMs: 1,
      }),
    );
  }

  it('retries a 503 (honouring Retry-After) and then scores', async () => {
    answers.push(
      { status: 503, body: { object: 'error', message: 'overloaded' }, headers: { 'retry-after-ms': '5' } },
      { status: 200, body: vllmBody },
    );
    const [scores] = await scorer().score([{ promptIds: [11], completionIds: [12, 13] }], { temperature: 1, topK: 0 });
    expect(scores).toEqual({ logprobs: [-0.5, -4.25] });
    expect(received).toBe(2);
  });

  it("fails a 400 at once with the server's message", async () => {
    answers.push({
      status: 400,
      body: { object: 'error', message: 'Requested prompt logprobs of 50, which is greater than max allowed: 20' },
    });
    await expect(
      scorer().score([{ promptIds: [11], completionIds: [12] }], { temperature: 1, topK: 50 }),
    ).rejects.toThrow(
      /\[MODEL_BAD_REQUEST\].*HTTP 400: Requested prompt logprobs of 50, which is greater than max allowed: 20/,
    );
    expect(received).toBe(1);
  });
});
