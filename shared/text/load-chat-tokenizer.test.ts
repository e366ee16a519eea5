import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { presetFiles } from './__fixtures__/preset-files';
import { plainChat } from './__fixtures__/sample-conversations';
import { loadChatTokenizer } from './load-chat-tokenizer';
import { tokenizeConversation } from './tokenize-conversation';

const temporary: string[] = [];

/** A model directory holding the Qwen3 package's tokenizer.json and the given other files. */
function modelDirectory(files: Record<string, string>, withTokenizer = true): string {
  const directory = mkdtempSync(path.join(tmpdir(), 'hat-model-'));
  temporary.push(directory);
  if (withTokenizer)
    symlinkSync(path.join(presetFiles('qwen3').directory, 'tokenizer.json'), path.join(directory, 'tokenizer.json'));
  for (const [name, contents] of Object.entries(files)) writeFileSync(path.join(directory, name), contents);
  return directory;
}

afterAll(() => {
  for (const directory of temporary) rmSync(directory, { recursive: true, force: true });
});

describe('loadChatTokenizer', () => {
  test('defaults to the qwen3 package and turns special-token text into special ids', async () => {
    const tokenizer = await loadChatTokenizer();
    expect(tokenizer).toBe(await loadChatTokenizer({ preset: 'qwen3' }));
    expect(tokenizer.name).toBe('qwen3');
    expect(tokenizer.encode('<|im_start|>user\n你好<|im_end|>')).toEqual([151644, 872, 198, 108386, 151645]);
    expect(tokenizer.decode([151644, 872, 198, 108386, 151645])).toBe('<|im_start|>user\n你好<|im_end|>');
    expect(tokenizer.eosTokenId).toBe(151645);
    expect(tokenizer.vocabSize).toBe(151669);
    expect(tokenizer.specialTokens).toContain('<|im_start|>');
    expect(tokenizer.endOfTurnTokens).toEqual(['<|im_end|>']);
  });

  test('a chat template override changes the template hash, not the fingerprint', async () => {
    const own = await loadChatTokenizer({ preset: 'qwen3' });
    const override = await loadChatTokenizer({
      preset: 'qwen3',
      chatTemplate: '{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}',
    });
    expect(override.fingerprint).toBe(own.fingerprint);
    expect(override.templateHash).not.toBe(own.templateHash);
    expect(override.templateFeatures.rendersToolCalls).toBe(false);
  });

  test('loads a model directory: chat_template.jinja wins over the config, generation_config adds stop tokens', async () => {
    const { config } = presetFiles('qwen3');
    const directory = modelDirectory({
      'tokenizer_config.json': JSON.stringify(config),
      'chat_template.jinja':
        '{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}',
      'generation_config.json': JSON.stringify({ eos_token_id: [151645, 151643] }),
    });
    const tokenizer = await loadChatTokenizer({ modelDir: directory });
    expect(tokenizer.name).toBe(path.basename(directory));
    expect(tokenizer.fingerprint).toBe((await loadChatTokenizer({ preset: 'qwen3' })).fingerprint);
    expect(tokenizer.endOfTurnTokens).toEqual(['<|im_end|>', '<|endoftext|>']);
    const result = tokenizeConversation(tokenizer, plainChat.messages, [], { trainOn: 'last' });
    expect(
      result.ok &&
        result.sample.text.endsWith(
          '<|im_start|>assistant\nFor dry skin, the hyaluronic serum (A1) is the best pick.<|im_end|>\n',
        ),
    ).toBe(true);
  });

  test('reads named templates from the config and picks tool_use when tools are given', async () => {
    const { config } = presetFiles('qwen3');
    const named = {
      ...config,
      chat_template: [
        { name: 'default', template: 'plain' },
        { name: 'tool_use', template: 'tools: {{ tools | length }}' },
      ],
    };
    const tokenizer = await loadChatTokenizer({
      modelDir: modelDirectory({ 'tokenizer_config.json': JSON.stringify(named) }),
    });
    expect(tokenizer.render([{ role: 'user', content: 'hi' }], {})).toBe('plain');
    expect(
      tokenizer.render([{ role: 'user', content: 'hi' }], {
        tools: [{ type: 'function', function: { name: 'f', parameters: {} } }],
      }),
    ).toBe('tools: 1');
  });

  test('reports a missing or broken file, a missing template and a bad source with what to do', async () => {
    const { config } = presetFiles('qwen3');
    const noTokenizer = modelDirectory({ 'tokenizer_config.json': JSON.stringify(config) }, false);
    await expect(loadChatTokenizer({ modelDir: noTokenizer })).rejects.toThrow(
      `[TOKENIZER_FILE_MISSING] ${path.join(noTokenizer, 'tokenizer.json')} not found`,
    );
    const broken = modelDirectory({ 'tokenizer_config.json': '{"eos_token": ' });
    await expect(loadChatTokenizer({ modelDir: broken })).rejects.toThrow(
      /^\[TOKENIZER_FILE_INVALID\] .*tokenizer_config\.json: .*replace it with the model's original file/,
    );
    const latin1 = modelDirectory({});
    writeFileSync(path.join(latin1, 'tokenizer_config.json'), Buffer.from([0x7b, 0x22, 0xe9, 0x22, 0x3a, 0x31, 0x7d]));
    await expect(loadChatTokenizer({ modelDir: latin1 })).rejects.toThrow(
      `[BAD_ENCODING] ${path.join(latin1, 'tokenizer_config.json')}: line 1: byte 3 of the line (byte offset 2 of the file) is not valid UTF-8`,
    );
    const { chat_template: _template, ...withoutTemplate } = config;
    const noTemplate = modelDirectory({ 'tokenizer_config.json': JSON.stringify(withoutTemplate) });
    await expect(loadChatTokenizer({ modelDir: noTemplate })).rejects.toThrow(
      /^\[CHAT_TEMPLATE_MISSING\] .* has no chat template .*pass one with chatTemplate/,
    );
    await expect(loadChatTokenizer({ preset: 'gpt2' as never })).rejects.toThrow(
      /^\[TOKENIZER_PRESET_UNKNOWN\] unknown tokenizer preset "gpt2"; use one of qwen3, deepseek_v3, llama3_1/,
    );
    await expect(loadChatTokenizer({ preset: 'qwen3', modelDir: noTemplate })).rejects.toThrow(
      /^\[TOKENIZER_SOURCE_AMBIGUOUS\]/,
    );
  });
});
