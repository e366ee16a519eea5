import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parityTemplates } from './__fixtures__/python-parity/templates';
import { ChatTemplate } from './chat-template';
import { parseJsonKeepingFloats } from './python-values';
import { probeTemplateFeatures } from './template-features';
import { trajectoryToTemplateInput, type TemplateConventions } from './template-input';
import type { ChatMessage, ToolSpec } from '../trajectory/messages';

/**
 * The differential test of #34: every shipped chat template renders a generated corpus of
 * conversations and tool schemas (booleans, None, floats such as 99.0 and 1e16, integers beyond
 * 2^53, nested schema values, escapes, unicode, invalid argument JSON, thinking on and off) here,
 * with both engines, and in Python Jinja as transformers' apply_chat_template renders it
 * (__fixtures__/python-parity/differential.py, run with the trainer's virtual environment, which
 * `make test` builds before jest). The strings must be equal; a refusal must be a refusal on both
 * sides, with the same message when the template raised it. HAT_DIFFERENTIAL_COUNT and
 * HAT_DIFFERENTIAL_SEED change the corpus (defaults 120 and 34).
 */

const root = join(__dirname, '..', '..');
const python = join(root, 'trainer', '.venv', 'bin', 'python');
const script = join(__dirname, '__fixtures__', 'python-parity', 'differential.py');
const count = Number(process.env.HAT_DIFFERENTIAL_COUNT ?? 120);
const seed = Number(process.env.HAT_DIFFERENTIAL_SEED ?? 34);

interface Conversation {
  name: string;
  messages: ChatMessage[];
  tools: ToolSpec[];
  addGenerationPrompt: boolean;
  thinking: boolean | null;
}
type PythonRendering = { text: string } | { raised: string; kind: string };

/** Where two renderings part, with some text either side (a whole rendering is too long to read). */
function firstDifference(python: string, here: string): string {
  let at = 0;
  while (at < python.length && python[at] === here[at]) at++;
  const around = (text: string) => JSON.stringify(text.slice(Math.max(0, at - 60), at + 60));
  return `differs at ${at}: Python ${around(python)}, here ${around(here)}`;
}

const templates = parityTemplates();
const specialTokens = { bos_token: '<s>', eos_token: '</s>' };

const hasPython = existsSync(python);
if (!hasPython)
  console.warn(
    `python-differential.golden.test.ts skipped: no ${python} (run \`make trainer\` to build the trainer's virtual environment; CI builds it)`,
  );
const describeWithPython = hasPython ? describe : describe.skip;

describeWithPython('every shipped template against Python Jinja over a generated corpus', () => {
  let conversations: Conversation[];
  let renderings: Record<string, PythonRendering[]>;
  const conventions: Record<string, TemplateConventions> = {};

  beforeAll(() => {
    for (const [name, text] of Object.entries(templates)) {
      const template = new ChatTemplate(text, specialTokens, 'interpreter');
      const features = probeTemplateFeatures((messages, options) => template.render(messages, options));
      conventions[name] = { toolCallContent: features.toolCallContent, toolArguments: features.toolArguments };
    }
    const directory = mkdtempSync(join(tmpdir(), 'hat-differential-'));
    try {
      const out = join(directory, 'python.json');
      const run = spawnSync(python, [script, out, String(count), String(seed), JSON.stringify(conventions)], {
        encoding: 'utf8',
        timeout: 170_000,
      });
      if (run.status !== 0)
        throw new Error(`differential.py failed (${run.status ?? run.signal}): ${run.stderr.slice(-2000)}`);
      // Floats stay floats (`99.0`), as Python holds them.
      const result = parseJsonKeepingFloats(readFileSync(out, 'utf8')) as {
        conversations: Conversation[];
        renderings: Record<string, PythonRendering[]>;
      };
      conversations = result.conversations;
      renderings = result.renderings;
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  }, 180_000);

  test('the corpus holds every value kind the issue names', () => {
    const text = JSON.stringify(conversations);
    for (const needle of ['"additionalProperties":false', '"default":null', '1e+16', '"minimum":1', '\\u2028'])
      expect(text).toContain(needle);
    expect(conversations).toHaveLength(count);
    expect(Object.keys(renderings).sort()).toEqual(Object.keys(templates).sort());
  });

  const cases = Object.keys(templates).flatMap((name) =>
    (['interpreter', 'compiled'] as const).map((engine) => [name, engine] as const),
  );

  test.each(cases)(
    '%s with the %s engine renders every conversation as Python Jinja does',
    (name, engine) => {
      const template = new ChatTemplate(templates[name], specialTokens, engine);
      const differences: string[] = [];
      let rendered = 0;
      for (const [index, conversation] of conversations.entries()) {
        const expected = renderings[name][index];
        const input = trajectoryToTemplateInput(conversation.messages, conversation.tools, conventions[name]);
        let actual: PythonRendering;
        try {
          actual = {
            text: template.render(input.messages, {
              tools: input.tools,
              addGenerationPrompt: conversation.addGenerationPrompt,
              ...(conversation.thinking === null ? {} : { enableThinking: conversation.thinking }),
            }),
          };
        } catch (error) {
          actual = { raised: (error as Error).message, kind: 'Error' };
        }
        if ('text' in expected) {
          rendered++;
          if (!('text' in actual))
            differences.push(`${conversation.name}: Python rendered, here raised ${actual.raised}`);
          else if (actual.text !== expected.text)
            differences.push(`${conversation.name}: ${firstDifference(expected.text, actual.text)}`);
        } else if (
          'text' in actual ||
          (expected.kind === 'TemplateError' && !actual.raised.includes(`template raised: ${expected.raised}`))
        ) {
          differences.push(
            `${conversation.name}: Python raised ${JSON.stringify(expected)}\nhere ${JSON.stringify(actual)}`,
          );
        }
      }
      expect(differences.slice(0, 3)).toEqual([]);
      expect(differences).toHaveLength(0);
      // The corpus must exercise the template: most conversations render (Gemma 3 refuses tool turns).
      expect(rendered).toBeGreaterThan(name === 'gemma3' ? 10 : count / 2);
    },
    120_000,
  );
});
