import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileArtifactStore } from '../../shared/artifacts/file-artifact-store';
import { presetFiles } from '../../shared/text/__fixtures__/preset-files';
import { tokenizerSourceSchema } from '../../shared/text/tokenizer-source-config';
import { shardTokenizerSchema } from '../../workers/shard/shard-contract';
import { loadTokenizerSource } from './load-tokenizer-source';

/** One tokenizer source for every stage: the schema's rules, and a chatTemplate override read through the store. */

it('accepts a preset, a model directory or neither (qwen3), and refuses both or an unknown preset, naming the fix', () => {
  expect(tokenizerSourceSchema.safeParse({}).success).toBe(true);
  expect(tokenizerSourceSchema.safeParse({ preset: 'llama3_1', hookMessages: 'folded' }).success).toBe(true);
  expect(tokenizerSourceSchema.safeParse({ modelDir: '/models/x', chatTemplate: 's3://b/t.jinja' }).success).toBe(true);
  const both = tokenizerSourceSchema.safeParse({ preset: 'qwen3', modelDir: '/models/x' });
  expect(both.error?.issues[0]?.message).toBe('give either preset or modelDir, not both');
  expect(tokenizerSourceSchema.safeParse({ preset: 'gpt2' }).success).toBe(false);
  expect(tokenizerSourceSchema.safeParse({ preset: 'qwen3', vocab: 'x' }).success).toBe(false);
  expect(shardTokenizerSchema).toBe(tokenizerSourceSchema);
});

it('loads the chat template override through the artifact store, names it in messages, and keeps the vocabulary', async () => {
  const directory = await mkdtemp(join(tmpdir(), 'hat-template-'));
  try {
    const store = new FileArtifactStore(directory);
    const template = (presetFiles('qwen3').config as { chat_template: string }).chat_template;
    await store.put('custom.jinja', `{{- 'CUSTOM:' -}}\n${template}`);
    const openObject = (uri: string) => ({ store, key: store.keyOf(uri) });
    const plain = await loadTokenizerSource({}, openObject);
    const custom = await loadTokenizerSource(
      { chatTemplate: store.uriOf('custom.jinja') },
      openObject,
      'student.tokenizer',
    );
    expect(custom.fingerprint).toBe(plain.fingerprint);
    expect(custom.templateLabel).toMatch(/custom\.jinja/);
    const messages = [{ role: 'user' as const, content: 'hi' }];
    expect(custom.render(messages, { addGenerationPrompt: true })).toBe(
      `CUSTOM:${plain.render(messages, { addGenerationPrompt: true })}`,
    );
    await expect(
      loadTokenizerSource({ chatTemplate: store.uriOf('missing.jinja') }, openObject, 'student.tokenizer'),
    ).rejects.toThrow(/\[ARTIFACT_NOT_FOUND\] student\.tokenizer\.chatTemplate: .*missing\.jinja does not exist/);
    // A Latin-1 byte in a template would render U+FFFD into every training sample: refused instead.
    await store.put(
      'latin1.jinja',
      Buffer.concat([Buffer.from("{{- 'caf"), Buffer.from([0xe9]), Buffer.from("' -}}\n")]),
    );
    await expect(
      loadTokenizerSource({ chatTemplate: store.uriOf('latin1.jinja') }, openObject, 'student.tokenizer'),
    ).rejects.toThrow(
      `[BAD_ENCODING] student.tokenizer.chatTemplate: ${store.uriOf('latin1.jinja')}: line 1: byte 9 of the line (byte offset 8 of the file) is not valid UTF-8`,
    );
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
});
