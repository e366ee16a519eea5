import { sha256Hex } from '../../hash/hash';
import type { ChatRequest, ChatResponse, ModelClient } from '../../models/model-client';
import { Rng } from '../../random/rng';
import type { AssistantMessage, ToolCall } from '../../trajectory/messages';
import { ScriptedExpert, type ScriptedExpertOptions } from './scripted-expert';

/**
 * A simulation policy for RL plumbing and reward-spread checks: the scripted expert with
 * seeded, configurable mistakes of the kinds real policies make. It is labelled as a
 * simulation (`simulated: true`, model id `scripted-stochastic (simulation policy)`) so its
 * trajectories are never mistaken for a model's.
 */
export interface ErrorRates {
  /** A tool call goes to another tool of the harness. */
  wrongTool: number;
  /** One argument of a tool call is changed (another id, quantity + 1, another enum value). */
  wrongArgument: number;
  /** A tool call's arguments are cut off (invalid JSON). */
  malformedJson: number;
  /** A number in the reply is replaced by a made-up one. */
  hallucinatedNumber: number;
  /** The reply gains an advertising-law absolute claim. */
  bannedWord: number;
  /** The reply runs far past the length limit. */
  overlongReply: number;
}

export const defaultErrorRates: ErrorRates = {
  wrongTool: 0.05,
  wrongArgument: 0.08,
  malformedJson: 0.03,
  hallucinatedNumber: 0.1,
  bannedWord: 0.05,
  overlongReply: 0.08,
};

export interface StochasticPolicyOptions extends ScriptedExpertOptions {
  seed: string | number;
  errorRates?: Partial<ErrorRates>;
  /** An expert to wrap (shares its task and harness registrations). */
  expert?: ScriptedExpert;
}

const bannedClaims = ['全网最低价', '绝对好用', '销量第一', '顶级品质'];
const filler = '这款真的非常值得入手，库存真的不多了，喜欢的家人们抓紧时间下单吧，错过今天就要等下一次活动了哦';

export class StochasticPolicy implements ModelClient {
  readonly specificationVersion = 'v1' as const;
  readonly provider = 'scripted';
  readonly modelId = 'scripted-stochastic (simulation policy)';
  readonly simulated = true;
  readonly expert: ScriptedExpert;
  readonly errorRates: ErrorRates;
  private readonly seed: string;

  constructor(options: StochasticPolicyOptions) {
    this.expert = options.expert ?? new ScriptedExpert(options);
    this.errorRates = { ...defaultErrorRates, ...options.errorRates };
    this.seed = String(options.seed);
  }

  async chat(request: ChatRequest): Promise<ChatResponse> {
    const response = await this.expert.chat(request);
    // The draw depends on the conversation, not on call order: reruns and retries repeat it.
    const conversation = sha256Hex(
      JSON.stringify(request.messages.slice(-4)) + String(request.messages.length) + String(request.seed ?? ''),
    );
    const rng = new Rng(`stochastic/${this.seed}/${conversation}`);
    const toolNames = (request.tools ?? []).map((tool) => tool.function.name);
    const message: AssistantMessage =
      response.message.tool_calls !== undefined
        ? this.perturbCalls(response.message.tool_calls, toolNames, rng)
        : this.perturbReply(response.message.content ?? '', rng);
    return { ...response, message, model: this.modelId };
  }

  private perturbCalls(calls: ToolCall[], toolNames: string[], rng: Rng): AssistantMessage {
    const rates = this.errorRates;
    const changed = calls.map((call): ToolCall => {
      let { name, arguments: args } = call.function;
      if (toolNames.length > 1 && rng.chance(rates.wrongTool))
        name = rng.pick(toolNames.filter((candidate) => candidate !== name));
      if (rng.chance(rates.wrongArgument)) args = mutateArguments(args, rng);
      if (rng.chance(rates.malformedJson)) args = args.slice(0, Math.max(1, args.length - rng.int(1, 4)));
      return { ...call, function: { name, arguments: args } };
    });
    return { role: 'assistant', content: null, tool_calls: changed };
  }

  private perturbReply(content: string, rng: Rng): AssistantMessage {
    const rates = this.errorRates;
    let text = content;
    if (rng.chance(rates.hallucinatedNumber)) {
      const numbers = [...text.matchAll(/\d+(?:\.\d+)?/g)];
      if (numbers.length > 0) {
        const target = rng.pick(numbers);
        const made = Math.round(Number(target[0]) * (1.1 + rng.next() * 0.4) + 1);
        text = `${text.slice(0, target.index)}${made}${text.slice((target.index ?? 0) + target[0].length)}`;
      }
    }
    if (rng.chance(rates.bannedWord)) text = `${text.replace(/~$/, '')}，${rng.pick(bannedClaims)}~`;
    if (rng.chance(rates.overlongReply)) text = `${text.replace(/~$/, '')}，${filler}~`;
    return { role: 'assistant', content: text };
  }
}

/** Changes one argument the way a confused model would. */
function mutateArguments(raw: string, rng: Rng): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return raw;
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return raw;
  const record = parsed as Record<string, unknown>;
  const keys = Object.keys(record);
  if (keys.length === 0) return JSON.stringify({ item_id: '600000000000' });
  const key = rng.pick(keys);
  const value = record[key];
  if (typeof value === 'number') record[key] = value + 1;
  else if (typeof value === 'string')
    record[key] = /^\d+$/.test(value) ? `${value.slice(0, -1)}${(Number(value.slice(-1)) + 1) % 10}` : `${value}x`;
  else if (Array.isArray(value)) record[key] = value.slice(0, 1);
  else delete record[key];
  return JSON.stringify(record);
}
