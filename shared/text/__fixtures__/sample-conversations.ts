import type { ChatMessage, ToolSpec } from '../../trajectory/messages';

// Tool call ids are nine alphanumerics because Mistral's templates refuse any other shape.

/** Live-room conversations covering what chat templates treat differently: Chinese text, emoji, nested and invalid tool arguments, parallel calls, several turns. */
export interface SampleConversation {
  name: string;
  messages: ChatMessage[];
  tools: ToolSpec[];
}

export const sampleTools: ToolSpec[] = [
  {
    type: 'function',
    function: {
      name: 'get_item_detail',
      description: '查询商品详情（价格、库存、规格）',
      parameters: { type: 'object', properties: { item_id: { type: 'string', description: '商品编号' } }, required: ['item_id'] },
    },
  },
  {
    type: 'function',
    function: {
      name: 'list_coupons',
      description: 'List coupons that apply to the viewer',
      parameters: {
        type: 'object',
        properties: {
          filter: {
            type: 'object',
            properties: {
              categories: { type: 'array', items: { type: 'string' } },
              min_discount: { type: 'number' },
              flags: { type: 'object', properties: { new_user: { type: 'boolean' } } },
            },
          },
          limit: { type: 'integer' },
        },
      },
    },
  },
];

const system: ChatMessage = { role: 'system', content: '你是直播间的带货助手，回答要准确、简洁。Answer in the viewer\'s language.' };

/** system, user, assistant with parallel tool calls, tool results, answer, follow-up user, one call, result, final answer. */
export const toolSession: SampleConversation = {
  name: 'tool-session',
  tools: sampleTools,
  messages: [
    system,
    { role: 'user', content: 'A1 现在多少钱？有优惠券吗？😀' },
    {
      role: 'assistant',
      content: null,
      tool_calls: [
        { id: 'callA0001', type: 'function', function: { name: 'get_item_detail', arguments: '{"item_id": "A1"}' } },
        {
          id: 'callA0002',
          type: 'function',
          function: { name: 'list_coupons', arguments: '{"filter":{"categories":["美妆","护肤"],"min_discount":0.5,"flags":{"new_user":true}},"limit":3}' },
        },
      ],
    },
    { role: 'tool', tool_call_id: 'callA0001', content: '{"item_id": "A1", "title": "玻尿酸精华 30ml", "price": 129, "stock": 42}' },
    { role: 'tool', tool_call_id: 'callA0002', content: '[{"code": "NEW20", "discount": 0.8, "note": "新人专享 🎁"}]' },
    { role: 'assistant', content: 'A1 玻尿酸精华现价 129 元，库存 42 件。新人可用 NEW20 券打 8 折 🎁' },
    { role: 'user', content: 'What about A2? 🙏' },
    { role: 'assistant', content: null, tool_calls: [{ id: 'callA0003', type: 'function', function: { name: 'get_item_detail', arguments: '{"item_id":"A2"}' } }] },
    { role: 'tool', tool_call_id: 'callA0003', content: '{"item_id": "A2", "title": "Sunscreen SPF50", "price": 89.5, "stock": 0}' },
    { role: 'assistant', content: 'A2 (Sunscreen SPF50) costs ¥89.5 but is sold out right now 😢' },
  ],
};

/** No tools: multi-turn chat. */
export const plainChat: SampleConversation = {
  name: 'plain-chat',
  tools: [],
  messages: [
    system,
    { role: 'user', content: '主播好！今天有什么新品？✨' },
    { role: 'assistant', content: '今天上新了三款：玻尿酸精华、防晒霜和唇釉 💄' },
    { role: 'user', content: 'Which one is best for dry skin?' },
    { role: 'assistant', content: 'For dry skin, the hyaluronic serum (A1) is the best pick.' },
  ],
};

/** system, user, two parallel calls, two results, answer. */
export const parallelCalls: SampleConversation = {
  name: 'parallel-calls',
  tools: sampleTools,
  messages: toolSession.messages.slice(0, 6),
};

/** system, user, one call, its result, answer (DeepSeek-V3's template gives this turn no end-of-turn token). */
export const singleCall: SampleConversation = {
  name: 'single-call',
  tools: sampleTools,
  messages: [system, ...toolSession.messages.slice(6, 10)],
};

/** One call with arguments that are not valid JSON (kept as the raw string). */
export const invalidArguments: SampleConversation = {
  name: 'invalid-arguments',
  tools: sampleTools,
  messages: [
    system,
    { role: 'user', content: 'A3 有货吗？' },
    { role: 'assistant', content: '我查一下。', tool_calls: [{ id: 'callA0009', type: 'function', function: { name: 'get_item_detail', arguments: '{"item_id": "A3"' } }] },
    { role: 'tool', tool_call_id: 'callA0009', content: 'error: arguments are not valid JSON' },
    { role: 'assistant', content: '抱歉，查询失败了，请稍后再试 🙇' },
  ],
};

export const sampleConversations: SampleConversation[] = [toolSession, plainChat, parallelCalls, singleCall, invalidArguments];
