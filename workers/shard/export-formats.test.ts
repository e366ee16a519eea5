import { invalidArguments, toolSession } from '../../shared/text/__fixtures__/sample-conversations';
import type { ChatMessage } from '../../shared/trajectory/messages';
import fc from 'fast-check';
import { parseJsonKeepingFloats } from '../../shared/text/python-values';
import type { ToolSpec } from '../../shared/trajectory/messages';
import {
  exportBody,
  exportBodyJson,
  exportLinePieces,
  lineageSuffix,
  exportRecord,
  llamaFactoryDatasetInfo,
  openAiMessages,
  toolsJson,
  toolsSchemaHash,
  verlMessagesOf,
  type ExportConversation,
} from './export-formats';
import { exportFormats } from './shard-contract';

const session: ExportConversation = {
  id: 's1',
  sourceId: 's1',
  taskId: 't1',
  messages: toolSession.messages,
  tools: toolSession.tools,
};

/** Floats a tool schema and the model's arguments hold (`1.0`, `99.0`), which JSON.parse and JSON.stringify turn into integers. */
const floats: ExportConversation = {
  id: 'f1',
  sourceId: 'f1',
  taskId: 't2',
  tools: [
    {
      type: 'function',
      function: {
        name: 'quote',
        description: '报价',
        parameters: parseJsonKeepingFloats(
          '{"type":"object","properties":{"price":{"type":"number","minimum":1.0,"maximum":1e16,"default":2.50}}}',
        ) as ToolSpec['function']['parameters'],
      },
    },
  ],
  messages: [
    { role: 'user', content: '多少钱？' },
    {
      role: 'assistant',
      content: '',
      tool_calls: [
        { id: 'c1', type: 'function', function: { name: 'quote', arguments: '{"price": 99.0, "n": 1e-7}' } },
      ],
    },
    { role: 'tool', tool_call_id: 'c1', content: '{"price": 99}' },
    { role: 'assistant', content: '99 元' },
  ],
};

/** A hooked conversation as the simulator records it: system messages injected mid-conversation. */
const hooked: ChatMessage[] = [
  { role: 'system', content: '你是主播小桃' },
  { role: 'system', content: '本场主推款：A1' },
  { role: 'user', content: 'A1 多少钱？' },
  { role: 'system', content: '本条回复不超过60个字' },
  {
    role: 'assistant',
    content: null,
    tool_calls: [
      { id: 'c1', type: 'function', function: { name: 'quote_final_price', arguments: '{"item_id":"A1"}' } },
    ],
  },
  { role: 'tool', tool_call_id: 'c1', content: '{"final": 109}' },
  { role: 'system', content: '工具结果已返回，请据此回答' },
  { role: 'assistant', content: '到手 109 元 🎁' },
];

describe('exportRecord', () => {
  test('openai: arguments become objects (nested, Chinese kept), tools are a JSON string, invalid JSON stays the recorded text', () => {
    const { record, notes } = exportRecord('openai', session);
    const messages = record.messages as Array<Record<string, unknown>>;
    expect(messages[2]).toEqual({
      role: 'assistant',
      content: '',
      tool_calls: [
        { id: 'callA0001', type: 'function', function: { name: 'get_item_detail', arguments: { item_id: 'A1' } } },
        {
          id: 'callA0002',
          type: 'function',
          function: {
            name: 'list_coupons',
            arguments: {
              filter: { categories: ['美妆', '护肤'], min_discount: 0.5, flags: { new_user: true } },
              limit: 3,
            },
          },
        },
      ],
    });
    expect(messages[3]).toEqual({ role: 'tool', tool_call_id: 'callA0001', content: toolSession.messages[3].content });
    expect(JSON.parse(record.tools as string)).toEqual(toolSession.tools);
    expect(record).toMatchObject({ id: 's1', source_id: 's1', task_id: 't1', folded_hook_messages: 0 });
    expect(notes).toEqual({ foldedSystemMessages: 0, droppedCallText: 0 });
    const invalid = exportRecord('openai', { ...session, messages: invalidArguments.messages }).record
      .messages as Array<{ tool_calls?: Array<{ function: { arguments: unknown } }> }>;
    expect(invalid[2].tool_calls?.[0].function.arguments).toBe('{"item_id": "A3"');
  });

  test('ms-swift: one tool_call message per call with {name, arguments}, tool_response for results', () => {
    const { record } = exportRecord('ms-swift', session);
    const messages = record.messages as Array<{ role: string; content: string }>;
    expect(messages.map((message) => message.role)).toEqual([
      'system',
      'user',
      'tool_call',
      'tool_call',
      'tool_response',
      'tool_response',
      'assistant',
      'user',
      'tool_call',
      'tool_response',
      'assistant',
    ]);
    expect(JSON.parse(messages[3].content)).toEqual({
      name: 'list_coupons',
      arguments: { filter: { categories: ['美妆', '护肤'], min_discount: 0.5, flags: { new_user: true } }, limit: 3 },
    });
    expect(messages.at(-1)).toEqual({
      role: 'assistant',
      content: 'A2 (Sunscreen SPF50) costs ¥89.5 but is sold out right now 😢',
    });
    // Text said before a call stays, as an assistant message in front of it.
    const withText = exportRecord('ms-swift', { ...session, messages: invalidArguments.messages }).record
      .messages as Array<{ role: string; content: string }>;
    expect(withText.slice(2, 4)).toEqual([
      { role: 'assistant', content: '我查一下。' },
      { role: 'tool_call', content: '{"name":"get_item_detail","arguments":"{\\"item_id\\": \\"A3\\""}' },
    ]);
  });

  test('llama-factory: parallel calls are one function_call list, their results one observation, turns alternate', () => {
    const { record, notes } = exportRecord('llama-factory', session);
    const messages = record.messages as Array<{ role: string; content: string }>;
    expect(record.system).toBe(toolSession.messages[0].content);
    expect(messages.map((message) => message.role)).toEqual([
      'user',
      'function_call',
      'observation',
      'assistant',
      'user',
      'function_call',
      'observation',
      'assistant',
    ]);
    expect(JSON.parse(messages[1].content)).toEqual([
      { name: 'get_item_detail', arguments: { item_id: 'A1' } },
      {
        name: 'list_coupons',
        arguments: { filter: { categories: ['美妆', '护肤'], min_discount: 0.5, flags: { new_user: true } }, limit: 3 },
      },
    ]);
    expect(JSON.parse(messages[5].content)).toEqual({ name: 'get_item_detail', arguments: { item_id: 'A2' } });
    expect(messages[2].content).toBe(`${toolSession.messages[3].content}\n${toolSession.messages[4].content}`);
    expect(notes.skipped).toBeUndefined();
    expect(
      exportRecord('llama-factory', { ...session, messages: invalidArguments.messages }).notes.droppedCallText,
    ).toBe(1);
  });

  test('ms-swift and llama-factory fold later system messages into the neighbouring user-side turn; openai keeps them', () => {
    const conversation = { ...session, messages: hooked };
    const swift = exportRecord('ms-swift', conversation);
    expect(swift.record.messages).toEqual([
      { role: 'system', content: '你是主播小桃\n\n本场主推款：A1' },
      { role: 'user', content: 'A1 多少钱？\n\n本条回复不超过60个字' },
      { role: 'tool_call', content: '{"name":"quote_final_price","arguments":{"item_id":"A1"}}' },
      { role: 'tool_response', content: '{"final": 109}\n\n工具结果已返回，请据此回答' },
      { role: 'assistant', content: '到手 109 元 🎁' },
    ]);
    expect(swift.notes.foldedSystemMessages).toBe(2);
    const factory = exportRecord('llama-factory', conversation);
    expect(factory.record).toMatchObject({ system: '你是主播小桃\n\n本场主推款：A1' });
    expect((factory.record.messages as Array<{ role: string }>).map((message) => message.role)).toEqual([
      'user',
      'function_call',
      'observation',
      'assistant',
    ]);
    expect((exportRecord('openai', conversation).record.messages as unknown[]).length).toBe(hooked.length);
  });

  test('llama-factory skips a conversation whose turns cannot alternate', () => {
    const twice: ChatMessage[] = [
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'a' },
      { role: 'assistant', content: 'b' },
    ];
    expect(exportRecord('llama-factory', { ...session, messages: twice }).notes.skipped).toContain('alternate');
  });

  test('dataset_info entries use the OpenAI-style tags and the files given', () => {
    expect(llamaFactoryDatasetInfo({ hat_sft_train: '../train/llama-factory.jsonl.gz' })).toEqual({
      hat_sft_train: expect.objectContaining({
        file_name: '../train/llama-factory.jsonl.gz',
        formatting: 'sharegpt',
        tags: expect.objectContaining({
          role_tag: 'role',
          function_tag: 'function_call',
          observation_tag: 'observation',
        }),
      }),
    });
    expect(toolsSchemaHash(toolSession.tools)).toBe(toolsSchemaHash(JSON.parse(JSON.stringify(toolSession.tools))));
  });
});

describe('export lines assembled from serialized bodies', () => {
  const conversations: ExportConversation[] = [
    session,
    { ...session, messages: invalidArguments.messages },
    { ...session, messages: hooked, id: 'a"\\b', sourceId: '源\u2028', taskId: 't\n1' },
    floats,
  ];

  test('are the record written keeping floats (JSON.stringify where none is involved), for every format, conversation and lineage', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...conversations),
        fc.constantFrom(...exportFormats),
        fc.string(),
        fc.string(),
        fc.string(),
        fc.nat(5),
        (conversation, format, id, sourceId, taskId, foldedHookMessages) => {
          const body = Buffer.from(exportBodyJson(exportBody(format, conversation).body));
          const tools = Buffer.from(JSON.stringify(toolsJson(conversation.tools)));
          const { record } = exportRecord(format, { ...conversation, id, sourceId, taskId, foldedHookMessages });
          const line = Buffer.concat(
            exportLinePieces(body, tools, lineageSuffix({ id, sourceId, taskId, foldedHookMessages })),
          ).toString('utf8');
          expect(line).toBe(exportBodyJson(record));
          if (conversation !== floats) expect(line).toBe(JSON.stringify(record));
          // Every record says how many hook messages its rendering folded (0: none).
          expect(record.folded_hook_messages).toBe(foldedHookMessages);
        },
      ),
      { numRuns: 300 },
    );
  });

  test('keep the floats of tool schemas and arguments, written as Python json.dumps writes them', () => {
    // Python: json.dumps(value, separators=(',', ':'), ensure_ascii=False) of the same values.
    expect(toolsJson(floats.tools)).toBe(
      '[{"type":"function","function":{"name":"quote","description":"报价","parameters":{"type":"object","properties":{"price":{"type":"number","minimum":1.0,"maximum":1e+16,"default":2.5}}}}}]',
    );
    const bodies = Object.fromEntries(
      exportFormats.map((format) => [format, exportBodyJson(exportBody(format, floats).body)]),
    );
    expect(bodies.openai).toContain('"arguments":{"price":99.0,"n":1e-07}');
    expect(bodies['ms-swift']).toContain(
      '"content":"{\\"name\\":\\"quote\\",\\"arguments\\":{\\"price\\":99.0,\\"n\\":1e-07}}"',
    );
    expect(bodies['llama-factory']).toContain('{\\"price\\":99.0,\\"n\\":1e-07}');
    // The schema hash is the one the integers gave: rows group as before.
    expect(toolsSchemaHash(floats.tools)).toBe(toolsSchemaHash(JSON.parse(toolsJson(floats.tools)) as ToolSpec[]));
  });

  test("verl's messages cut from the openai body equal the column computed directly", () => {
    for (const conversation of conversations) {
      const messages = [...conversation.messages, { role: 'user' as const, content: '{"messages":"x"}' }];
      const body = Buffer.from(JSON.stringify(exportBody('openai', { messages, tools: conversation.tools }).body));
      expect(verlMessagesOf(body).toString('utf8')).toBe(JSON.stringify(openAiMessages(messages)));
    }
    expect(() => verlMessagesOf(Buffer.from('{"tools":[]}'))).toThrow('not the JSON text');
  });

  test("verl's messages do not keep the decompressed chunk they were cut from alive", () => {
    // As the fan-in reads it: a body is a slice of a large decompressed chunk.
    const body = Buffer.from(JSON.stringify(exportBody('openai', conversations[0]).body));
    const chunk = Buffer.alloc(256 * 1024);
    body.copy(chunk, 1000);
    const messages = verlMessagesOf(chunk.subarray(1000, 1000 + body.length));
    expect(messages.buffer).not.toBe(chunk.buffer);
    expect(messages.toString('utf8')).toBe(JSON.stringify(openAiMessages(conversations[0].messages)));
  });
});
