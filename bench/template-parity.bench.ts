/**
 * Chat-template renderings against Python Jinja's (transformers' apply_chat_template): seeded
 * conversations over the live-host harness tools, with arguments of every kind Python prints
 * unlike JavaScript (booleans, None, floats that hold integers, unicode, nested values), rendered
 * by Python (shared/text/__fixtures__/python-parity/figure.py) and here, with ChatTemplate's
 * interpreter and compiled engines and with @huggingface/jinja's own Template (what rendering was
 * before values printed as Python). Prints, per template, how many texts equal Python's.
 *
 *   make build-dev && node dist/bench/template-parity.bench.js [--count 360] [--seed 34]
 *
 * The interpreter is HAT_TRAINER_PYTHON, else trainer/.venv/bin/python (`make trainer`). Run from
 * the repository root (the templates are read from shared/text/__fixtures__).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Template } from '@huggingface/jinja';
import { trainerPython } from '../cli/command-trainer';
import { ChatTemplate } from '../shared/text/chat-template';
import { presetDirectory } from '../shared/text/load-chat-tokenizer';
import { trajectoryToTemplateInput } from '../shared/text/template-input';
import type { ChatMessage, ToolSpec } from '../shared/trajectory/messages';
import { checkBenchFlags } from './bench-flags';

function argument(name: string): string | undefined {
  const index = process.argv.indexOf(`--${name}`);
  return index === -1 ? undefined : process.argv[index + 1];
}

const fixtures = path.join('shared', 'text', '__fixtures__');
const templates: Record<string, string> = {
  qwen3: (
    JSON.parse(readFileSync(path.join(presetDirectory('qwen3'), 'tokenizer_config.json'), 'utf8')) as {
      chat_template: string;
    }
  ).chat_template,
  qwen3_5: readFileSync(path.join(fixtures, 'chat-templates', 'Qwen3.5-4B.jinja'), 'utf8'),
  qwen3_coder: readFileSync(path.join(fixtures, 'chat-templates', 'Qwen3-Coder.original.jinja'), 'utf8'),
};

function main(): void {
  checkBenchFlags('node dist/bench/template-parity.bench.js [--count 360] [--seed 34]');
  const directory = mkdtempSync(path.join(tmpdir(), 'hat-template-parity-'));
  try {
    const python = trainerPython();
    const script = path.join(fixtures, 'python-parity', 'figure.py');
    const run = spawnSync(python, [script, directory, argument('count') ?? '360', argument('seed') ?? '34'], {
      stdio: 'inherit',
    });
    if (run.status !== 0) {
      console.error(
        `template-parity bench: ${python} ${script} failed (${run.error?.message ?? `exit ${run.status}`}); run \`make trainer\` or set HAT_TRAINER_PYTHON`,
      );
      process.exitCode = 1;
      return;
    }
    const cases = JSON.parse(readFileSync(path.join(directory, 'cases.json'), 'utf8')) as {
      tools: ToolSpec[];
      conversations: Array<{ messages: ChatMessage[] }>;
    };
    const expected = JSON.parse(readFileSync(path.join(directory, 'python.json'), 'utf8')) as Record<
      string,
      Array<string | null>
    >;
    const special = { bos_token: '<s>', eos_token: '</s>' };
    console.log('template       engine        equal to Python   refused');
    for (const [name, text] of Object.entries(templates)) {
      const engines: Record<string, (messages: ChatMessage[]) => string> = {};
      for (const engine of ['interpreter', 'compiled'] as const) {
        const template = new ChatTemplate(text, special, engine);
        engines[engine] = (messages) => {
          const input = trajectoryToTemplateInput(messages, cases.tools);
          return template.render(input.messages, { tools: input.tools });
        };
      }
      const library = new Template(text);
      engines['library'] = (messages) => {
        const input = trajectoryToTemplateInput(messages, cases.tools);
        // The library's own converter: plain JSON values, as rendering was before PythonFloat.
        const plain = JSON.parse(JSON.stringify(input)) as typeof input;
        return library.render({
          ...special,
          messages: plain.messages,
          tools: plain.tools,
          add_generation_prompt: false,
        });
      };
      for (const [engine, render] of Object.entries(engines)) {
        let equal = 0;
        let refused = 0;
        cases.conversations.forEach((conversation, index) => {
          let text: string | null;
          try {
            text = render(conversation.messages);
          } catch {
            text = null;
            refused++;
          }
          if (text === expected[name][index]) equal++;
        });
        const total = cases.conversations.length;
        console.log(
          `${name.padEnd(14)} ${engine.padEnd(13)} ${`${equal}/${total}`.padStart(15)}   ${String(refused).padStart(7)}`,
        );
      }
    }
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
}

main();
