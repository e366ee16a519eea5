import type { ModelClient, SamplingSettings } from '../../models/model-client';
import { Rng } from '../../random/rng';
import type { ChatMessage } from '../../trajectory/messages';
import type { Intent, SimpleIntent, Task } from '../tasks/task-schema';
import { chattyMessage } from '../tasks/viewer-chatter';
import { phraseIntent } from '../tasks/viewer-phrasing';
import type { World } from '../world/world';

/**
 * The viewer side of a multi-turn episode: what the viewer says at each follow-up turn. The
 * intent of every turn is fixed by the task (so the verifier's expectations hold); a viewer
 * only decides the wording.
 */
export interface ViewerTurnInput {
  task: Task;
  /** 1 for the first follow-up (turn 0 is always the task's own opening message). */
  turnIndex: number;
  /** The conversation so far (read-only). */
  messages: readonly ChatMessage[];
  world: World;
}

export interface ViewerMessage {
  text: string;
  /** Where the wording came from: the task as written, a scripted paraphrase, a model, or the task after a model failure. */
  source: 'task' | 'scripted' | 'model' | 'fallback';
}

export interface Viewer {
  readonly kind: string;
  nextMessage(input: ViewerTurnInput): Promise<ViewerMessage>;
}

export interface ScriptedViewerOptions {
  seed: string | number;
  /** Chance of rephrasing a follow-up instead of using the task's wording. Default 1. */
  paraphraseRate?: number;
}

/**
 * Seeded template paraphrases of each follow-up (same intent, different wording per seed), as
 * chatty as the task's own messages when it was generated with `text: cjk-heavy`.
 */
export function createScriptedViewer(options: ScriptedViewerOptions): Viewer {
  const rate = options.paraphraseRate ?? 1;
  return {
    kind: 'scripted',
    async nextMessage({ task, turnIndex, world }) {
      const turn = task.turns[turnIndex];
      if (turn === undefined) throw new RangeError(`task ${task.id} has no turn ${turnIndex}`);
      const rng = new Rng(`viewer/${options.seed}/${task.id}/${turnIndex}`);
      if (!rng.chance(rate)) return { text: turn.message, source: 'task' };
      const question = phraseIntent(turn.intent, world, rng);
      const chatty = task.source.kind === 'generated' && task.source.text === 'cjk-heavy';
      return { text: chatty ? chattyMessage(question, turn.intent, rng) : question, source: 'scripted' };
    },
  };
}

/** The task's own follow-up messages, word for word (the default). */
export const taskViewer: Viewer = {
  kind: 'task',
  async nextMessage({ task, turnIndex }) {
    const turn = task.turns[turnIndex];
    if (turn === undefined) throw new RangeError(`task ${task.id} has no turn ${turnIndex}`);
    return { text: turn.message, source: 'task' };
  },
};

function describeSimple(intent: SimpleIntent): string {
  switch (intent.kind) {
    case 'price':
      return '问这件商品多少钱';
    case 'spec':
      return `问这件商品的${intent.specKey}`;
    case 'size':
      return `说自己身高${intent.heightCm}厘米、体重${intent.weightKg}公斤，问穿什么码${intent.checkStock ? '，以及那个码有没有货' : ''}`;
    case 'stock':
      return `问${[intent.color, intent.size, intent.spec].filter(Boolean).join('、') || '这件商品'}还有没有货`;
    case 'final_price':
      return `问买${intent.quantity}件${intent.spec ?? ''}用券后到手多少钱`;
    case 'policy':
      return {
        free_shipping: '问包不包邮',
        remote: `问发${intent.region ?? '偏远地区'}包不包邮`,
        dispatch: '问多久发货',
        returns: '问能不能七天无理由退货',
        warranty: '问保修多久',
        invoice: '问能不能开发票',
        special_invoice: '问能不能开增值税专票',
      }[intent.aspect];
    case 'compare':
      return '问两件商品哪个更划算';
    case 'chit_chat':
      return '和主播闲聊一句';
    case 'trap':
      return `问是不是"${intent.term}"`;
    case 'unknown_item':
      return `问直播间有没有${intent.query}`;
    case 'unknown_spec':
      return `问这件商品${intent.attribute}`;
  }
}

/** A short Chinese description of what a turn asks (for a model playing the viewer). */
export function describeIntent(intent: Intent): string {
  return intent.kind === 'multi' ? intent.parts.map(describeSimple).join('；同时') : describeSimple(intent);
}

export interface ModelViewerOptions {
  client: ModelClient;
  sampling?: SamplingSettings;
}

/**
 * A model plays the viewer: it gets the host's last reply and what to ask next, and writes the
 * comment. Empty or failed output falls back to the task's wording (recorded as `fallback`), so
 * a flaky viewer model never breaks an episode.
 */
export function createModelViewer(options: ModelViewerOptions): Viewer {
  return {
    kind: `model:${options.client.modelId}`,
    async nextMessage({ task, turnIndex, messages }) {
      const turn = task.turns[turnIndex];
      if (turn === undefined) throw new RangeError(`task ${task.id} has no turn ${turnIndex}`);
      const lastReply = [...messages]
        .reverse()
        .find((message) => message.role === 'assistant' && !message.tool_calls?.length);
      const prompt = [
        `主播刚才回复：${lastReply?.content ?? '（无）'}`,
        `你接下来要${describeIntent(turn.intent)}。`,
        `参考说法：${turn.message}`,
        '用一条口语化的直播弹幕说出来，不超过30个字，只输出弹幕本身。',
      ].join('\n');
      try {
        const response = await options.client.chat({
          ...options.sampling,
          messages: [
            { role: 'system', content: '你在模拟淘宝直播间里的一位观众，用弹幕和主播互动。' },
            { role: 'user', content: prompt },
          ],
        });
        const text = (response.message.content ?? '')
          .split('\n')[0]
          .replace(/^["“「]|["”」]$/g, '')
          .trim()
          .slice(0, 60);
        return text === '' ? { text: turn.message, source: 'fallback' } : { text, source: 'model' };
      } catch {
        return { text: turn.message, source: 'fallback' };
      }
    },
  };
}
