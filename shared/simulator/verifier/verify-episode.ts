import type { Harness } from '../../harness/harness-types';
import { activeConstraints, type ActiveConstraint } from '../../harness/render';
import type { ChatMessage } from '../../trajectory/messages';
import type { Reward } from '../../trajectory/trajectory';
import { renderContextOf } from '../room-context';
import { admitUnknownPhrases } from '../tasks/expectations';
import type { ArgumentConstraint, CallPattern, Expectations, Task, ToolRequirement } from '../tasks/task-schema';
import { compactText, extractNumbers } from '../text/normalize-text';
import { findTool, toCanonicalArguments } from '../../harness/tool-binding';
import { couponLabel, createWorld, formatYuan, type World } from '../world/world';
import { advertisingLawTerms, inventedPromisePatterns } from './compliance-rules';
import { describeFact, factStated, ReplyText } from './phrase-match';

/**
 * The reward of an episode, from the task's expectations, the world and the harness it ran
 * under, in [0, 1] with named components:
 * - facts: expected facts stated (numbers with tolerance, phrases normalized), not-knowing
 *   admitted where required, no money amounts that no number in the conversation supports;
 * - tools: required calls made with the right canonical arguments (resolved through the
 *   harness binding), minus a little for malformed or failed calls;
 * - compliance: no advertising-law absolute claims, task-forbidden terms or invented promises;
 * - hooks: every constraint in force (activeConstraints) met by every reply;
 * - format: no tool-call syntax, JSON, markup or tool names in the spoken reply.
 * Each component is the mean over the task's turns (an unanswered turn scores 0 everywhere).
 */

export const rewardComponents = ['facts', 'tools', 'compliance', 'hooks', 'format'] as const;
export type RewardComponent = (typeof rewardComponents)[number];
export type RewardWeights = Record<RewardComponent, number>;

/** Default weights: being right matters most, then using tools properly, then the rules. */
export const defaultRewardWeights: RewardWeights = {
  facts: 0.4,
  tools: 0.2,
  compliance: 0.15,
  hooks: 0.15,
  format: 0.1,
};

export interface VerifyEpisodeInput {
  task: Task;
  /** The harness the episode ran under (tool calls resolve through its bindings). */
  harness: Harness;
  messages: ChatMessage[];
  /** Turns the episode was meant to play. Default: all of the task's turns. */
  turnCount?: number;
  weights?: Partial<RewardWeights>;
  /** The task's world, when the caller already built it. */
  world?: World;
}

interface TurnRecord {
  reply?: string;
  calls: Array<{ id: string; name: string; arguments: string }>;
}

const malformedCodes = new Set(['INVALID_JSON', 'UNKNOWN_TOOL', 'SCHEMA_VIOLATION']);

function segmentTurns(messages: ChatMessage[]): { turns: TurnRecord[]; results: Map<string, string> } {
  const turns: TurnRecord[] = [];
  const results = new Map<string, string>();
  for (const message of messages) {
    if (message.role === 'assistant') {
      const turn = turns[turns.length - 1];
      if (turn === undefined) continue;
      if (message.tool_calls !== undefined && message.tool_calls.length > 0) {
        for (const call of message.tool_calls)
          turn.calls.push({ id: call.id, name: call.function.name, arguments: call.function.arguments });
      } else if (message.content !== null && message.content.trim() !== '') {
        turn.reply = message.content;
      }
    } else if (message.role === 'user') {
      turns.push({ calls: [] });
    } else if (message.role === 'tool') {
      results.set(message.tool_call_id, message.content);
    }
  }
  return { turns, results };
}

/**
 * Amounts (in cents) the host may quote: numbers in tool results (JSON: plain digits), in the
 * viewer's words and in the room's coupons (the prompt states those); the rest of the system
 * prompt holds no prices, by design. Built only when a reply states money at all.
 */
function groundingCents(messages: ChatMessage[], world: World): Set<number> {
  const cents = new Set<number>();
  const add = (value: number) => cents.add(Math.round(value * 100));
  for (const coupon of world.snapshot.coupons) {
    add(coupon.threshold);
    add(coupon.amount);
  }
  for (const message of messages) {
    if (message.role === 'tool') for (const match of message.content.match(/\d+(?:\.\d+)?/g) ?? []) add(Number(match));
    else if (message.role === 'user') for (const value of extractNumbers(message.content)) add(value);
  }
  return cents;
}

function valuesEqual(actual: unknown, expected: string | number | boolean): boolean {
  if (typeof actual === 'number' && typeof expected === 'number') return Math.abs(actual - expected) < 1e-9;
  if (typeof actual === 'string' && typeof expected === 'string') return compactText(actual) === compactText(expected);
  return actual === expected;
}

function argumentMatches(value: unknown, constraint: ArgumentConstraint): boolean {
  if (value === undefined || value === null) return constraint.optional === true;
  if (constraint.equals !== undefined && !valuesEqual(value, constraint.equals)) return false;
  if (constraint.oneOf !== undefined && !constraint.oneOf.some((option) => valuesEqual(value, option))) return false;
  if (
    constraint.approx !== undefined &&
    !(typeof value === 'number' && Math.abs(value - constraint.approx) <= (constraint.tolerance ?? 0.5))
  )
    return false;
  if (
    constraint.includesAll !== undefined &&
    !(
      Array.isArray(value) &&
      constraint.includesAll.every((wanted) => value.some((entry) => valuesEqual(entry, wanted)))
    )
  )
    return false;
  return true;
}

interface ResolvedCall {
  capability: string;
  canonical: Record<string, unknown>;
}

function resolveCalls(
  harness: Harness,
  turn: TurnRecord,
  results: Map<string, string>,
): { resolved: ResolvedCall[]; malformed: number; failed: number } {
  const resolved: ResolvedCall[] = [];
  let malformed = 0;
  let failed = 0;
  for (const call of turn.calls) {
    const result = results.get(call.id) ?? '';
    if (result.startsWith('{"error"')) {
      const code = /"code":"([A-Z_]+)"/.exec(result)?.[1] ?? '';
      if (malformedCodes.has(code)) malformed++;
      else failed++;
      continue;
    }
    const tool = findTool(harness, call.name);
    if (tool === undefined) {
      malformed++;
      continue;
    }
    try {
      const parsed: unknown = call.arguments.trim() === '' ? {} : JSON.parse(call.arguments);
      if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new TypeError('not an object');
      resolved.push({
        capability: tool.binding.capability,
        canonical: toCanonicalArguments(tool.binding, parsed as Record<string, unknown>),
      });
    } catch {
      malformed++;
    }
  }
  return { resolved, malformed, failed };
}

function patternMet(pattern: CallPattern, calls: ResolvedCall[]): boolean {
  return calls.some(
    (call) =>
      call.capability === pattern.capability &&
      Object.entries(pattern.arguments ?? {}).every(([name, constraint]) =>
        argumentMatches(call.canonical[name], constraint),
      ),
  );
}

function requirementMet(requirement: ToolRequirement, calls: ResolvedCall[]): boolean {
  return requirement.anyOf.some((alternative) => alternative.every((pattern) => patternMet(pattern, calls)));
}

function mentionPhrases(world: World, constraint: ActiveConstraint): string[] {
  if (constraint.constraint.type !== 'must_mention') return [];
  const phrases = constraint.mention !== undefined ? [constraint.mention] : [];
  if (constraint.constraint.target === 'active_coupon' && world.activeCoupon !== undefined) {
    const coupon = world.activeCoupon;
    phrases.push(
      coupon.name,
      couponLabel(coupon),
      `减${formatYuan(coupon.amount)}`,
      `${formatYuan(coupon.amount)}元券`,
      `${formatYuan(coupon.amount)}元优惠券`,
      `${formatYuan(coupon.amount)}元的券`,
    );
  }
  if (constraint.constraint.target === 'featured_item' && world.snapshot.featuredItemId !== undefined) {
    const item = world.itemsById.get(world.snapshot.featuredItemId);
    if (item !== undefined) phrases.push(item.shortName, item.title);
  }
  if (constraint.constraint.target === 'campaign' && world.activeCampaign !== undefined)
    phrases.push(world.activeCampaign.name);
  return phrases;
}

/** Whether a reply meets one hook constraint; the reason when it does not. */
export function checkConstraint(world: World, constraint: ActiveConstraint, reply: ReplyText): string | undefined {
  const rule = constraint.constraint;
  switch (rule.type) {
    case 'max_chars': {
      const length = [...reply.raw.trim()].length;
      return length <= rule.value ? undefined : `${length} chars > ${rule.value}`;
    }
    case 'must_mention': {
      const phrases = mentionPhrases(world, constraint);
      return phrases.length === 0 || reply.containsAny(phrases) !== undefined
        ? undefined
        : `does not mention ${constraint.mention ?? rule.target}`;
    }
    case 'banned_terms': {
      const found = rule.terms.filter((term) => reply.raw.includes(term));
      return found.length === 0 ? undefined : `says banned ${found.join('、')}`;
    }
    case 'tone': {
      const used = rule.markers.filter((marker) => reply.raw.includes(marker)).length;
      const needed = rule.minMarkers ?? 1;
      return used >= needed ? undefined : `${used} tone markers < ${needed} (${rule.markers.join('/')})`;
    }
    case 'none':
      return undefined;
  }
}

/** Problems that make a reply unfit to be spoken aloud. */
export function formatProblems(reply: string, harness: Harness): string[] {
  const problems: string[] = [];
  if (reply.trim() === '') return ['empty reply'];
  if (/<\/?tool_call>|<function[=\s>]|<\|[a-z_]+\|>|"(name|arguments)"\s*:/i.test(reply))
    problems.push('tool-call syntax');
  if (/[{[]\s*"[^"]+"\s*[:,\]]/.test(reply)) problems.push('JSON');
  if (/<\/?[a-z][a-z0-9_-]*(\s[^>]*)?>|\*\*|```|^#{1,6}\s|^\s*[-*]\s/im.test(reply)) problems.push('markup');
  const lower = reply.toLowerCase();
  const leaked = harness.tools
    .map((tool) => tool.name)
    .filter((name) => /[a-z_]{4,}/i.test(name) && lower.includes(name.toLowerCase()));
  if (leaked.length > 0 || /\b(item_id|sku_id)\b/.test(lower))
    problems.push(`tool names (${leaked.join(', ') || 'argument names'})`);
  return problems;
}

function complianceProblems(reply: ReplyText, expect: Expectations): string[] {
  const problems: string[] = [];
  for (const term of advertisingLawTerms) if (reply.raw.includes(term)) problems.push(`absolute claim ${term}`);
  for (const { term } of expect.forbidden)
    if (reply.raw.includes(term) && !problems.includes(`absolute claim ${term}`)) problems.push(`forbidden ${term}`);
  for (const [pattern, label] of inventedPromisePatterns)
    if (pattern.test(reply.raw)) problems.push(`invented promise (${label})`);
  return problems;
}

/** Money amounts that neither the conversation nor the expectations support. */
function unsupportedAmounts(reply: ReplyText, grounding: () => Set<number>, expect: Expectations): number[] {
  if (reply.money.length === 0) return [];
  const expected = new Set(expect.facts.flatMap((fact) => fact.values ?? []).map((value) => Math.round(value * 100)));
  return reply.money.filter((amount) => {
    const cents = Math.round(amount * 100);
    return !expected.has(cents) && !grounding().has(cents);
  });
}

function weightedTotal(components: Record<RewardComponent, number>, weights: RewardWeights): number {
  let sum = 0;
  let weightSum = 0;
  for (const name of rewardComponents) {
    sum += components[name] * weights[name];
    weightSum += weights[name];
  }
  return weightSum > 0 ? Math.min(1, Math.max(0, sum / weightSum)) : 0;
}

export function verifyEpisode(input: VerifyEpisodeInput): Reward {
  const { task, harness } = input;
  const weights = { ...defaultRewardWeights, ...input.weights };
  const world = input.world ?? createWorld(task.room);
  const constraints = activeConstraints(harness, renderContextOf(world));
  const { turns, results } = segmentTurns(input.messages);
  let cents: Set<number> | undefined;
  const grounding = () => (cents ??= groundingCents(input.messages, world));
  const turnCount = Math.max(1, Math.min(input.turnCount ?? task.turns.length, task.turns.length));
  const sums: Record<RewardComponent, number> = { facts: 0, tools: 0, compliance: 0, hooks: 0, format: 0 };
  const notes: string[] = [];

  for (let index = 0; index < turnCount; index++) {
    const expect = task.turns[index].expect;
    const turn = turns[index];
    const where = `turn ${index + 1}`;
    if (turn?.reply === undefined) {
      notes.push(`${where}: no reply`);
      continue;
    }
    const reply = new ReplyText(turn.reply);

    // facts
    const missing = expect.facts.filter((fact) => !factStated(reply, fact));
    let checks = expect.facts.length;
    let met = checks - missing.length;
    for (const fact of missing) notes.push(`${where} facts: missing ${describeFact(fact)}`);
    if (expect.admitUnknown) {
      checks++;
      if (reply.containsAny(admitUnknownPhrases) !== undefined) met++;
      else notes.push(`${where} facts: does not admit not knowing`);
    }
    let facts = checks === 0 ? 1 : met / checks;
    const unsupported = unsupportedAmounts(reply, grounding, expect);
    if (unsupported.length > 0) {
      facts = Math.max(0, facts - 0.25 * unsupported.length);
      notes.push(`${where} facts: amounts nothing supports: ${unsupported.join(', ')}`);
    }
    sums.facts += facts;

    // tools
    const { resolved, malformed, failed } = resolveCalls(harness, turn, results);
    const unmet = expect.tools.filter((requirement) => !requirementMet(requirement, resolved));
    for (const requirement of unmet) notes.push(`${where} tools: no call satisfied "${requirement.label}"`);
    let tools = expect.tools.length === 0 ? 1 : (expect.tools.length - unmet.length) / expect.tools.length;
    if (malformed + failed > 0) {
      tools = Math.max(0, tools - 0.1 * malformed - 0.05 * failed);
      notes.push(`${where} tools: ${malformed} malformed and ${failed} failed calls`);
    }
    sums.tools += tools;

    // compliance
    const violations = complianceProblems(reply, expect);
    for (const violation of violations) notes.push(`${where} compliance: ${violation}`);
    sums.compliance += Math.max(0, 1 - 0.5 * violations.length);

    // hooks
    const failures = constraints
      .map((constraint) => [constraint, checkConstraint(world, constraint, reply)] as const)
      .filter(([, reason]) => reason !== undefined);
    for (const [constraint, reason] of failures) notes.push(`${where} hooks: ${constraint.hookId}: ${reason}`);
    sums.hooks += constraints.length === 0 ? 1 : (constraints.length - failures.length) / constraints.length;

    // format
    const problems = formatProblems(turn.reply, harness);
    for (const problem of problems) notes.push(`${where} format: ${problem}`);
    sums.format += Math.max(0, 1 - 0.5 * problems.length);
  }

  const components = Object.fromEntries(
    rewardComponents.map((name) => [name, round4(sums[name] / turnCount)]),
  ) as Record<RewardComponent, number>;
  return { total: round4(weightedTotal(components, weights)), components, notes };
}

function round4(value: number): number {
  return Math.round(value * 10_000) / 10_000;
}
