import type { TokenizerSource } from '../../text/tokenizer-source-config';
import { ScoringEndpoint, type RemoteScorerConfig, type ScoringEndpointDependencies } from './scoring-endpoint';
import type { CompletionScores, ScoreOptions, TokenProbe, TokenScoreRequest, TokenScorer } from './token-scorer';

/** How one server's scoring API is spoken: its path, request body and response reading. */
export interface ScoringApi {
  /** Recorded with the scores and named in messages (`vllm`, `sglang`). */
  engine: string;
  /** Path under the server root, e.g. `/v1/completions`. */
  path: string;
  /** The body that scores every one of `tokenIds`, with `topK` alternatives and, when `withText`, each token's text. */
  requestBody(
    config: RemoteScorerConfig,
    tokenIds: readonly number[],
    topK: number,
    withText: boolean,
  ): Record<string, unknown>;
  /** The completion tokens' scores of a response to `requestBody(prompt + completion)`. */
  completionScores(body: unknown, request: TokenScoreRequest, topK: number, url: string): CompletionScores;
  /** The text the server reported for each of `tokenIds`, null where none. */
  tokenTexts(body: unknown, tokenIds: readonly number[], url: string): Array<string | null>;
}

/**
 * A teacher behind an inference server: one request per sequence (concurrency bounded by the
 * endpoint's limit), scored at temperature 1, which is all such servers offer for prompt tokens.
 */
export class RemoteTokenScorer implements TokenScorer {
  readonly engine: string;
  readonly fixedLogprobTemperature = 1;
  readonly modelId: string;
  readonly location: string;
  readonly dummyWeights: boolean;
  readonly tokenizer?: TokenizerSource;
  readonly tokenizerFingerprint?: string;
  private readonly endpoint: ScoringEndpoint;

  constructor(
    private readonly api: ScoringApi,
    private readonly config: RemoteScorerConfig & { tokenizer?: TokenizerSource; tokenizerFingerprint?: string },
    dependencies: ScoringEndpointDependencies = {},
  ) {
    this.endpoint = new ScoringEndpoint(config, dependencies);
    this.engine = api.engine;
    this.modelId = config.model;
    this.location = `${this.endpoint.root}${api.path}`;
    this.dummyWeights = config.dummyWeights;
    if (config.tokenizer !== undefined) this.tokenizer = config.tokenizer;
    if (config.tokenizerFingerprint !== undefined) this.tokenizerFingerprint = config.tokenizerFingerprint;
  }

  async score(requests: readonly TokenScoreRequest[], options: ScoreOptions): Promise<CompletionScores[]> {
    return Promise.all(
      requests.map(async (request) => {
        const tokenIds = [...request.promptIds, ...request.completionIds];
        const body = await this.endpoint.post(
          this.api.path,
          this.api.requestBody(this.config, tokenIds, options.topK, false),
          options.signal,
        );
        return this.api.completionScores(body, request, options.topK, this.location);
      }),
    );
  }

  async probe(tokenIds: readonly number[], signal?: AbortSignal): Promise<TokenProbe> {
    return probeThrough(this.api, this.endpoint, this.config, tokenIds, signal);
  }

  async close(): Promise<void> {}
}

/**
 * The texts a server's own tokenizer gives `tokenIds`, asked through its scoring API (one request
 * with each token's text): how a served sampler of the same server is probed too.
 */
export async function probeThrough(
  api: ScoringApi,
  endpoint: ScoringEndpoint,
  config: RemoteScorerConfig,
  tokenIds: readonly number[],
  signal?: AbortSignal,
): Promise<TokenProbe> {
  const body = await endpoint.post(api.path, api.requestBody(config, tokenIds, 0, true), signal);
  return { texts: api.tokenTexts(body, tokenIds, `${endpoint.root}${api.path}`) };
}
