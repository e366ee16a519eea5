import { withoutHookBlocks } from '../../text/hook-messages';
import { BadInputError } from '../../errors';
import type { Harness, ToolCapability } from '../../harness/harness-types';
import { activeConstraints } from '../../harness/render';
import { canonicalJson } from '../../hash/hash';
import type { ChatRequest, ChatResponse, ModelClient } from '../../models/model-client';
import type { AssistantMessage, ChatMessage, ToolCall } from '../../trajectory/messages';
import { renderContextOf } from '../room-context';
import type { ItemRef, SimpleIntent, Task } from '../tasks/task-schema';
import {
  findTool,
  findToolByCapability,
  toCanonicalArguments,
  toolTakesArgument,
  toToolArguments,
} from '../../harness/tool-binding';
import { capabilityArgumentSpecs, type ArgumentSpec } from '../tools/capability-arguments';
import { couponLabel, createWorld, formatYuan, type World } from '../world/world';
import { composeReply, type Segment } from './reply-composer';

/**
 * A strong teacher for the simulator, as a ModelClient (provider `scripted`). It identifies the
 * task from the conversation (the viewer's first message and the room id in the system
 * prompt), plans tool calls by capability and writes them in whatever names and shapes the
 * harness it is given uses (found from the request's tools list), calls independent tools in
 * parallel, and composes a short, compliant Chinese reply from the tool results only, meeting
 * the hook constraints in force (length, coupon mention, tone markers, banned terms).
 */
export interface ScriptedExpertOptions {
  tasks?: Iterable<Task>;
  harnesses?: Iterable<Harness>;
  modelId?: string;
  /** Epoch ms stamped as each call's start. Default: a fixed instant (deterministic records). */
  now?: () => number;
}

interface CanonicalCall {
  capability: ToolCapability;
  args: Record<string, unknown>;
}

type ToolResult = Record<string, unknown>;

/** What the conversation has revealed, keyed by canonical call (capability + arguments). */
interface Knowledge {
  all: Map<string, ToolResult>;
  turn: Map<string, ToolResult>;
  /** Calls that failed in this turn (not retried). */
  failed: Set<string>;
}

interface TaskEntry {
  task: Task;
  world: World;
}

const fixedEpoch = Date.UTC(2025, 0, 1);

function callKey(call: CanonicalCall): string {
  return `${call.capability}|${canonicalJson(call.args)}`;
}

/**
 * Asks for calls it still needs and reads results it has; `pending` collects what is missing.
 * `fit` drops the optional arguments the harness's tool has no parameter for, so the call asked
 * for is the call written (and found again in the history by the same key).
 */
class Kit {
  readonly pending = new Map<string, CanonicalCall>();
  /** Calls of this request whose results came back as errors. */
  failures = 0;
  constructor(
    readonly knowledge: Knowledge,
    private readonly fit: (capability: ToolCapability, args: Record<string, unknown>) => Record<string, unknown>,
  ) {}

  /** The result of a call made in this turn, or undefined (then the call is queued). */
  need(
    capability: ToolCapability,
    args: Record<string, unknown>,
    scope: 'turn' | 'any' = 'turn',
  ): ToolResult | undefined {
    const call = { capability, args: this.fit(capability, args) };
    const key = callKey(call);
    const found = (scope === 'any' ? this.knowledge.all : this.knowledge.turn).get(key);
    if (found !== undefined) return found;
    if (this.knowledge.failed.has(key)) {
      this.failures++;
      return { unavailable: true };
    }
    this.pending.set(key, call);
    return undefined;
  }
}

const str = (value: unknown): string =>
  typeof value === 'string' ? value : typeof value === 'number' ? formatYuan(value) : '';
const num = (value: unknown): number => (typeof value === 'number' ? value : Number(value));

export class ScriptedExpert implements ModelClient {
  readonly specificationVersion = 'v1' as const;
  readonly provider = 'scripted';
  readonly modelId: string;
  readonly simulated = true;
  private readonly tasksByMessage = new Map<string, TaskEntry[]>();
  private readonly harnessesByTools = new Map<string, Harness>();
  private readonly now: () => number;

  constructor(options: ScriptedExpertOptions = {}) {
    this.modelId = options.modelId ?? 'scripted-expert';
    this.now = options.now ?? (() => fixedEpoch);
    this.addTasks(options.tasks ?? []);
    for (const harness of options.harnesses ?? []) this.addHarness(harness);
  }

  addTasks(tasks: Iterable<Task>): void {
    for (const task of tasks) {
      const key = task.turns[0].message;
      const entries = this.tasksByMessage.get(key) ?? [];
      if (!entries.some((entry) => entry.task.id === task.id)) entries.push({ task, world: createWorld(task.room) });
      this.tasksByMessage.set(key, entries);
    }
  }

  /** Makes a harness recognizable from the tools list a request carries. */
  addHarness(harness: Harness): void {
    this.harnessesByTools.set(harness.tools.map((tool) => tool.name).join('\u0000'), harness);
  }

  async chat(request: ChatRequest): Promise<ChatResponse> {
    const startedAt = this.now();
    const toolNames = (request.tools ?? []).map((tool) => tool.function.name);
    const harness = this.harnessesByTools.get(toolNames.join('\u0000'));
    if (harness === undefined) {
      throw new BadInputError(
        'EXPERT_UNKNOWN_HARNESS',
        `the scripted expert was not given the harness whose tools are ${toolNames.join(', ') || '(none)'}; pass it in harnesses`,
      );
    }
    const entry = this.findTask(request.messages);
    const userIndexes = request.messages.flatMap((message, index) => (message.role === 'user' ? [index] : []));
    const turnIndex = userIndexes.length - 1;
    const turn = entry.task.turns[Math.min(turnIndex, entry.task.turns.length - 1)];
    const knowledge = this.knowledgeOf(harness, request.messages, userIndexes[userIndexes.length - 1] ?? 0);
    const visible = new Set(toolNames);
    const kit = new Kit(knowledge, (capability, args) => fitArguments(harness, visible, capability, args));
    const parts = turn.intent.kind === 'multi' ? turn.intent.parts : [turn.intent];
    const segments = parts.map((part) => this.solveOrDefer(part, entry, turnIndex, kit, harness));

    let message: AssistantMessage;
    if (kit.pending.size > 0) {
      const stepInTurn = request.messages
        .slice(userIndexes[userIndexes.length - 1] ?? 0)
        .filter((entryMessage) => entryMessage.role === 'assistant').length;
      const toolCalls: ToolCall[] = [];
      for (const call of kit.pending.values()) {
        const tool = findToolByCapability(harness, call.capability, visible);
        if (tool === undefined) continue;
        toolCalls.push({
          id: `call-${turnIndex}-${stepInTurn}-${toolCalls.length}`,
          type: 'function',
          function: { name: tool.name, arguments: JSON.stringify(toToolArguments(tool.binding, call.args)) },
        });
      }
      message =
        toolCalls.length > 0
          ? { role: 'assistant', content: null, tool_calls: toolCalls }
          : { role: 'assistant', content: this.reply(harness, entry, segments.flat()) };
    } else {
      message = { role: 'assistant', content: this.reply(harness, entry, segments.flat()) };
    }
    return this.response(request, message, startedAt);
  }

  private findTask(messages: ChatMessage[]): TaskEntry {
    const system = messages.find((message) => message.role === 'system')?.content ?? '';
    const first = messages.find((message) => message.role === 'user')?.content ?? '';
    // The viewer's text comes first; hook suffixes start on a new line.
    const keys = [first, ...[...first.matchAll(/\n/g)].map((match) => first.slice(0, match.index))];
    for (const key of keys) {
      const candidates = this.tasksByMessage.get(key);
      if (candidates === undefined) continue;
      return candidates.find((candidate) => system.includes(candidate.task.room.roomId)) ?? candidates[0];
    }
    throw new BadInputError(
      'EXPERT_UNKNOWN_TASK',
      `the scripted expert has no task whose first message starts ${JSON.stringify(first.slice(0, 40))}; pass the task set in tasks`,
    );
  }

  private knowledgeOf(harness: Harness, messages: ChatMessage[], turnStart: number): Knowledge {
    const knowledge: Knowledge = { all: new Map(), turn: new Map(), failed: new Set() };
    const pending = new Map<string, { key: string; inTurn: boolean }>();
    messages.forEach((message, index) => {
      if (message.role === 'assistant' && message.tool_calls !== undefined) {
        for (const call of message.tool_calls) {
          const tool = findTool(harness, call.function.name);
          if (tool === undefined) continue;
          try {
            const args = toCanonicalArguments(
              tool.binding,
              JSON.parse(call.function.arguments || '{}') as Record<string, unknown>,
            );
            pending.set(call.id, {
              key: callKey({ capability: tool.binding.capability, args }),
              inTurn: index > turnStart,
            });
          } catch {
            // A malformed call of its own (stochastic variant) yields nothing to learn from.
          }
        }
      } else if (message.role === 'tool') {
        const origin = pending.get(message.tool_call_id);
        if (origin === undefined) return;
        let parsed: unknown;
        try {
          // An after_tool_result hook placed as a reminder block follows the result's JSON.
          parsed = JSON.parse(withoutHookBlocks(message.content));
        } catch {
          return;
        }
        const result = parsed as ToolResult;
        if (result.error !== undefined) {
          if (origin.inTurn) knowledge.failed.add(origin.key);
          return;
        }
        knowledge.all.set(origin.key, result);
        if (origin.inTurn) knowledge.turn.set(origin.key, result);
      }
    });
    return knowledge;
  }

  /** The item id a reference points at, or undefined while the tool that tells is pending. */
  private resolveRef(ref: ItemRef, entry: TaskEntry, turnIndex: number, kit: Kit): string | undefined {
    switch (ref.kind) {
      case 'featured':
        return entry.task.room.featuredItemId;
      case 'link': {
        const script = kit.need('live_script', {}, 'any');
        const links = (script?.links as Array<{ link_no: number; item_id: string }> | undefined) ?? [];
        return links.find((link) => link.link_no === ref.linkNo)?.item_id;
      }
      case 'name': {
        const found = kit.need('item_search', { query: ref.text }, 'any');
        return (found?.items as Array<{ item_id: string }> | undefined)?.[0]?.item_id;
      }
      case 'previous': {
        for (let index = turnIndex - 1; index >= 0; index--) {
          const intent = entry.task.turns[index].intent;
          const part = intent.kind === 'multi' ? intent.parts[0] : intent;
          if ('ref' in part) return this.resolveRef(part.ref, entry, index, kit);
        }
        return entry.task.room.featuredItemId;
      }
    }
  }

  /** Segments answering one part of the turn (empty while tools are pending). */
  /**
   * The reply segments of one intent; when a call it needed came back as an error (the harness's
   * tool refused it, the item has no such record), the host says it cannot check rather than
   * reading fields out of the error.
   */
  private solveOrDefer(
    intent: SimpleIntent,
    entry: TaskEntry,
    turnIndex: number,
    kit: Kit,
    harness: Harness,
  ): Segment[] {
    const failuresBefore = kit.failures;
    const segments = this.solve(intent, entry, turnIndex, kit, harness);
    if (kit.failures === failuresBefore) return segments;
    return [{ variants: ['这个小桃暂时查不到，以商品详情页为准哦', '这个暂时查不到，以详情页为准'], required: true }];
  }

  private solve(intent: SimpleIntent, entry: TaskEntry, turnIndex: number, kit: Kit, harness: Harness): Segment[] {
    const itemId = 'ref' in intent ? this.resolveRef(intent.ref, entry, turnIndex, kit) : undefined;
    if ('ref' in intent && itemId === undefined) return [];
    const id = itemId as string;
    const seg = (required: boolean, ...variants: string[]): Segment => ({ variants, required });
    switch (intent.kind) {
      case 'price':
        return this.priceSegments(kit.need('price_quote', { item_id: id }), intent.ref);
      case 'spec': {
        const detail = kit.need('item_detail', { item_id: id });
        if (detail === undefined) return [];
        const value = (detail.specs as Record<string, string> | undefined)?.[intent.specKey];
        return value === undefined
          ? [seg(true, `${intent.specKey}详情页没写，我帮你问问客服`)]
          : [seg(true, `${nameOf(detail, intent.ref)}${intent.specKey}是${value}`, `${intent.specKey}是${value}`)];
      }
      case 'size': {
        const rec = kit.need('size_recommendation', {
          item_id: id,
          height_cm: intent.heightCm,
          weight_kg: intent.weightKg,
        });
        if (rec === undefined) return [];
        const size = str(rec.recommended_size);
        const fit = str(rec.fit).startsWith('偏小') ? '这款偏小' : str(rec.fit).startsWith('偏大') ? '这款偏大' : '';
        const segments = [
          seg(
            true,
            `${intent.heightCm}cm${intent.weightKg}kg建议拍${size}码${fit ? `，${fit}` : ''}`,
            `建议拍${size}码`,
            `拍${size}码`,
          ),
        ];
        if (intent.checkStock) {
          const stock = kit.need('sku_stock', { item_id: id, size });
          if (stock === undefined) return [];
          segments.push(stockSegment(stock, `${size}码`));
        }
        return segments;
      }
      case 'stock': {
        const args: Record<string, unknown> = { item_id: id };
        if (intent.size !== undefined) args.size = intent.size;
        if (intent.color !== undefined) args.color = intent.color;
        const stock = kit.need('sku_stock', args);
        if (stock === undefined) return [];
        const label = [intent.color, intent.size !== undefined ? `${intent.size}码` : undefined, intent.spec]
          .filter(Boolean)
          .join('');
        return [stockSegment(stock, label, intent.spec)];
      }
      case 'final_price': {
        let skuId: string | undefined;
        if (intent.spec !== undefined) {
          const stock = kit.need('sku_stock', { item_id: id });
          if (stock === undefined) return [];
          skuId = (stock.skus as Array<{ sku_id: string; spec?: string }>).find(
            (sku) => sku.spec === intent.spec,
          )?.sku_id;
        }
        const args: Record<string, unknown> = { item_id: id };
        if (intent.quantity !== 1) args.quantity = intent.quantity;
        if (skuId !== undefined) args.sku_id = skuId;
        const quote = kit.need('price_quote', args);
        if (quote === undefined) return [];
        const final = str(quote.final_price);
        const what = `${intent.spec ?? ''}${intent.quantity > 1 ? `买${intent.quantity}件` : ''}`;
        return [
          seg(
            true,
            `${nameOf(quote, intent.ref)}${what}用券后到手${final}元`,
            `${what}到手${final}元`,
            `到手${final}元`,
          ),
        ];
      }
      case 'policy':
        return this.policySegments(intent, id, kit);
      case 'compare': {
        const ids = intent.items.map((item) => this.resolveRef(item.ref, entry, turnIndex, kit));
        if (ids.some((value) => value === undefined)) return [];
        const result = kit.need('item_comparison', { item_ids: ids });
        if (result === undefined) return [];
        const items = result.items as Array<{ short_name: string; price: number }>;
        const cheapest = result.cheapest as { short_name: string };
        const listing = items.map((item) => `${item.short_name}${formatYuan(item.price)}元`).join('，');
        return [seg(true, `${listing}，${cheapest.short_name}更便宜`, `${listing}，${cheapest.short_name}更划算`)];
      }
      case 'chit_chat': {
        const featured =
          entry.task.room.featuredItemId !== undefined
            ? entry.world.itemsById.get(entry.task.room.featuredItemId)?.shortName
            : undefined;
        const push = featured !== undefined ? [seg(false, `今天主推${featured}，可以看看`)] : [];
        switch (intent.topic) {
          case 'greeting':
            return [seg(true, '欢迎来到直播间', '欢迎欢迎'), ...push];
          case 'compliment':
            return [seg(true, '谢谢夸奖，开心', '谢谢夸奖'), ...push];
          case 'is_real':
            return [seg(true, `我是数字人主播${harness.persona.name}，有问题随时问我`, '我是数字人主播')];
          case 'thanks':
            return [seg(true, '感谢支持，有问题随时问', '感谢支持')];
        }
        return [];
      }
      case 'trap': {
        if (intent.trap === 'cheapest') {
          const segments = this.priceSegments(kit.need('price_quote', { item_id: id }), intent.ref);
          return segments.length === 0 ? [] : [seg(false, '咱不和别家比价哦', '不比价哦'), ...segments];
        }
        if (intent.trap === 'lifetime') {
          const terms = kit.need('policy', { topic: 'warranty', item_id: id });
          if (terms === undefined) return [];
          const months = num(terms.warranty_months);
          return months > 0
            ? [seg(true, `保修${months}个月，${str(terms.note)}`, `保修${months}个月`)]
            : [seg(true, `这款不涉及保修，${str(terms.note)}`, '这款不涉及保修')];
        }
        const detail = kit.need('item_detail', { item_id: id });
        if (detail === undefined) return [];
        const point = (detail.selling_points as string[] | undefined)?.[0] ?? '';
        return [seg(false, '好不好用看需求'), seg(true, point, point.split('，')[0] ?? point)];
      }
      case 'unknown_item': {
        const found = kit.need('item_search', { query: intent.query });
        if (found === undefined) return [];
        const first = (found.items as Array<{ short_name: string }> | undefined)?.[0];
        return first === undefined || num(found.total) === 0
          ? [seg(true, `直播间暂时没有${intent.query}哦`, `暂时没有${intent.query}`)]
          : [seg(true, `可以看看${first.short_name}`)];
      }
      case 'unknown_spec': {
        const detail = kit.need('item_detail', { item_id: id });
        if (detail === undefined) return [];
        return [seg(true, `${intent.attribute}详情页没写，我帮你问问客服`, '详情页没写，帮你问问客服')];
      }
    }
  }

  private priceSegments(quote: ToolResult | undefined, ref: ItemRef): Segment[] {
    if (quote === undefined) return [];
    const final = num(quote.final_price);
    const unit = num(quote.unit_price);
    const name = nameOf(quote, ref);
    return final < unit
      ? [
          {
            variants: [
              `${name}现价${formatYuan(unit)}元，用券到手${formatYuan(final)}元`,
              `${name}到手${formatYuan(final)}元`,
              `到手${formatYuan(final)}元`,
            ],
            required: true,
          },
        ]
      : [{ variants: [`${name}现价${formatYuan(unit)}元`, `现价${formatYuan(unit)}元`], required: true }];
  }

  private policySegments(intent: Extract<SimpleIntent, { kind: 'policy' }>, itemId: string, kit: Kit): Segment[] {
    const topic = {
      free_shipping: 'shipping',
      remote: 'shipping',
      dispatch: 'shipping',
      returns: 'returns',
      warranty: 'warranty',
      invoice: 'invoice',
      special_invoice: 'invoice',
    }[intent.aspect];
    const terms = kit.need('policy', { topic, item_id: itemId });
    if (terms === undefined) return [];
    const seg = (...variants: string[]): Segment[] => [{ variants, required: true }];
    const name = nameOf(terms, intent.ref);
    const threshold = num(terms.free_shipping_threshold);
    const shippingRule = threshold === 0 ? '包邮' : `满${formatYuan(threshold)}元包邮`;
    switch (intent.aspect) {
      case 'free_shipping':
        return seg(`${name}${shippingRule}`, shippingRule);
      case 'remote': {
        const region = intent.region ?? '';
        const remote = (terms.remote_regions as string[] | undefined)?.includes(region) ?? false;
        if (!remote) return seg(`${region}${shippingRule}`, shippingRule);
        const rule = str(terms.remote_rule);
        const fee = /补运费(\d+(?:\.\d+)?)元/.exec(rule)?.[1];
        return fee === undefined
          ? seg(`${region}暂不发货哦`, `${region}不发货`)
          : seg(`${region}不包邮，需补运费${fee}元`, `${region}需补${fee}元运费`);
      }
      case 'dispatch':
        return seg(`付款后${str(terms.dispatch_hours)}小时内发货`, `${str(terms.dispatch_hours)}小时内发`);
      case 'returns': {
        const days = num(terms.return_days);
        return days > 0
          ? seg(`${name}支持${days}天无理由退货`, `支持${days}天无理由`)
          : seg(
              `${name}不支持7天无理由退货，${str(terms.note).split('，').slice(-1)[0]}`,
              `${name}不支持7天无理由退货`,
              '不支持无理由退货',
            );
      }
      case 'warranty': {
        const months = num(terms.warranty_months);
        return months > 0
          ? seg(`${name}保修${months}个月，${str(terms.note)}`, `保修${months}个月`)
          : seg(`${name}不涉及保修，${str(terms.note)}`, '不涉及保修');
      }
      case 'invoice':
        return seg(`可以开${(terms.invoice_types as string[] | undefined)?.[0] ?? '电子普通发票'}`, '能开发票');
      case 'special_invoice':
        return (terms.invoice_types as string[] | undefined)?.includes('增值税专用发票')
          ? seg('可以开增值税专用发票', '能开专票')
          : seg('只能开电子普通发票', '只能开普票');
    }
  }

  private reply(harness: Harness, entry: TaskEntry, segments: Segment[]): string {
    const context = renderContextOf(entry.world);
    const coupon = entry.world.activeCoupon;
    const featured = context.featuredItem;
    return composeReply(segments, {
      constraints: activeConstraints(harness, context),
      mentions: {
        ...(coupon !== undefined
          ? { active_coupon: [`记得先领${coupon.name}`, `先领${couponLabel(coupon)}券`, `${couponLabel(coupon)}券`] }
          : {}),
        ...(featured !== undefined ? { featured_item: [`主推${featured}`, featured] } : {}),
        ...(context.campaign !== undefined ? { campaign: [`${context.campaign}进行中`, context.campaign] } : {}),
      },
    });
  }

  private response(request: ChatRequest, message: AssistantMessage, startedAt: number): ChatResponse {
    const promptChars = request.messages.reduce((sum, entry) => sum + (entry.content?.length ?? 0), 0);
    const output =
      message.content ??
      (message.tool_calls ?? []).map((call) => call.function.name + call.function.arguments).join('');
    const completionTokens = Math.max(1, Math.ceil(output.length / 1.3));
    // Latency shaped like a compact model on one GPU: prefill then ~15 ms per token.
    const ttftMs = 120 + Math.round(promptChars / 40);
    return {
      message,
      finishReason: message.tool_calls !== undefined ? 'tool_calls' : 'stop',
      usage: { promptTokens: Math.ceil(promptChars / 1.6), completionTokens, estimated: true },
      timings: { startedAt, queueMs: 0, ttftMs, e2eMs: ttftMs + completionTokens * 15 },
      model: this.modelId,
      attempts: 1,
    };
  }
}

/** How the host names an item in a reply: 这款 for the one on screen, else its short name. */
function nameOf(result: ToolResult, ref: ItemRef): string {
  if (ref.kind === 'featured' || ref.kind === 'previous') return '这款';
  return str(result.short_name) || '这款';
}

function stockSegment(stock: ToolResult, label: string, spec?: string): Segment {
  const skus = (stock.skus as Array<{ stock: number; spec?: string }> | undefined) ?? [];
  const relevant = spec !== undefined ? skus.filter((sku) => sku.spec === spec) : skus;
  const total = relevant.reduce((sum, sku) => sum + sku.stock, 0);
  if (total === 0) return { variants: [`${label}已售罄`, '已售罄'], required: true };
  if (total < 10) return { variants: [`${label}仅剩${total}件`, `仅剩${total}件`], required: true };
  return { variants: [`${label}有货`, '有货'], required: true };
}

/** The canonical arguments less the optional ones the capability's tool in this harness has no parameter for. */
function fitArguments(
  harness: Harness,
  visible: ReadonlySet<string>,
  capability: ToolCapability,
  args: Record<string, unknown>,
): Record<string, unknown> {
  const tool = findToolByCapability(harness, capability, visible);
  if (tool === undefined) return args;
  const specs: Partial<Record<string, ArgumentSpec>> = capabilityArgumentSpecs[capability];
  return Object.fromEntries(
    Object.entries(args).filter(([name]) => specs[name]?.required === true || toolTakesArgument(tool, name)),
  );
}
