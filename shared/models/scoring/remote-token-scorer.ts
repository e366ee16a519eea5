import { ScoringEndpoint, type RemoteScorerConfig, type ScoringEndpointDependencies } from './scoring-endpoint';
import type { CompletionScores, ScoreOptions, TokenProbe, TokenScoreRequest, TokenScorer } from './token-scorer';

/** How one server's scoring API is spoken: its path, request body and response reading. */
export interface ScoringApi {
  engine: 'vllm' | 'sglang';
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
  readonly engine: 'vllm' | 'sglang';
  readonly fixedLogprobTemperature = 1;
  readonly modelId: string;
  readonly location: string;
  readonly dummyWeights: boolean;
  private readonly endpoint: ScoringEndpoint;

  constructor(
    private readonly api: ScoringApi,
    private readonly config: RemoteScorerConfig,
    dependencies: ScoringEndpointDependencies = {},
  ) {
    this.endpoint = new ScoringEndpoint(config, dependencies);
    this.engine = api.engine;
    this.modelId = config.model;
    this.location = `${this.endpoint.root}${api.path}`;
    this.dummyWeights = config.dummyWeights;
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
    const body = await this.endpoint.post(this.api.path, this.api.requestBody(this.config, tokenIds, 0, true), signal);
    return { texts: this.api.tokenTexts(body, tokenIds, this.location) };
  }

  async close(): Promise<void> {}
}
