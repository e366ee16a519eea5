import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { FileArtifactStore } from '../shared/artifacts/file-artifact-store';
import { writeJsonl } from '../shared/artifacts/jsonl-writer';
import { sampleConversations } from '../shared/text/__fixtures__/sample-conversations';
import type { Trajectory } from '../shared/trajectory/trajectory';
import { summarizeShard } from '../workers/shard/shard-summary';
import type { ShardOutput } from '../workers/shard/shard-contract';
import { runHatInProcess } from './support/hat-in-process';

/**
 * `hat stage shard` when it refuses samples, as a user sees it: a shard that keeps nothing fails
 * with exit 1 and the top reasons instead of printing `done`; one that refuses more than the
 * configured share (default 5%) completes but prints the reasons, and its run-report figure is amber.
 */
function trajectory(index: number, messages: Trajectory['messages'], tools: Trajectory['tools']): Trajectory {
  return {
    schemaVersion: 1,
    id: `refusal-${index}`,
    taskId: `task-${index}`,
    category: 'fixture',
    messages,
    tools,
    harness: { id: 'fixture', version: '1', hash: 'fixture-hash' },
    model: { provider: 'test', id: 'hand-written', sampling: {}, simulated: true },
    calls: [],
    issues: [],
    status: 'ok',
    reward: { total: 1, components: {}, notes: [] },
    sampleIndex: 0,
    meta: {},
  };
}

/** A conversation Qwen3 accepts, made unique by its question. */
function accepted(index: number): Trajectory {
  const conversation = sampleConversations[index % sampleConversations.length];
  const messages = conversation.messages.map((message, position) =>
    position === 1 && message.role === 'user' ? { ...message, content: `${message.content} (#${index})` } : message,
  );
  return trajectory(index, messages, conversation.tools);
}

/** A conversation with no assistant turn: refused with NO_ASSISTANT_TURN. */
function refused(index: number): Trajectory {
  return trajectory(index, [{ role: 'user', content: `only a question #${index}` }], []);
}

describe('hat stage shard refusals', () => {
  let directory: string;
  const environment = () => ({ ...process.env, HAT_LOG_LEVEL: 'silent' });
  const uri = (name: string) => pathToFileURL(join(directory, name)).href;

  beforeAll(async () => {
    directory = await mkdtemp(join(tmpdir(), 'hat-shard-refusals-'));
  });
  afterAll(async () => {
    await rm(directory, { recursive: true, force: true });
  });

  async function input(name: string, trajectories: Trajectory[]): Promise<string> {
    await writeJsonl(new FileArtifactStore(directory), `${name}.jsonl.gz`, trajectories);
    return uri(`${name}.jsonl.gz`);
  }

  it('fails with exit 1 and the top refusal reasons when no sample is kept, writing no manifest', async () => {
    const source = await input('all-refused', [
      refused(1),
      refused(2),
      refused(3),
      trajectory(
        4,
        [
          { role: 'user', content: 'x <|im_end|>' },
          { role: 'assistant', content: 'y' },
        ],
        [],
      ),
    ]);
    const result = await runHatInProcess(
      environment(),
      'stage',
      'shard',
      '--in',
      source,
      '--out',
      uri('all-refused-out'),
    );
    expect(result.code).toBe(1);
    expect(result.stdout).not.toContain('done');
    expect(result.stderr).toContain(
      '[SHARD_NO_SAMPLES] the shard kept no sample: all 4 unique records were refused: NO_ASSISTANT_TURN ×3 (e.g. refusal-1: the conversation has no assistant message to train on); RESERVED_TEXT ×1',
    );
    await expect(
      new FileArtifactStore(join(directory, 'all-refused-out')).getBuffer('manifest.json'),
    ).rejects.toThrow();
  }, 120_000);

  it('completes a shard that refuses 10% but prints the reasons, and the run report shows the figure amber', async () => {
    const trajectories = [
      ...Array.from({ length: 18 }, (_unused, index) => accepted(index)),
      refused(100),
      refused(101),
    ];
    const source = await input('some-refused', trajectories);
    const result = await runHatInProcess(
      environment(),
      'stage',
      'shard',
      '--in',
      source,
      '--out',
      uri('some-refused-out'),
      '--json',
    );
    expect(result.code).toBe(0);
    const output = JSON.parse(result.stdout) as ShardOutput;
    expect(output).toMatchObject({
      records: 20,
      samples: 18,
      rejected: { NO_ASSISTANT_TURN: 2 },
      refusedShare: 0.1,
      warnRefusedShare: 0.05,
      templateWarnings: [],
    });
    expect(result.stderr).toContain(
      'warning: stage shard: rejected records: 2 (10.0% of unique records: NO_ASSISTANT_TURN 2)',
    );
    const figure = summarizeShard(output).figures.find((candidate) => candidate.label === 'rejected records');
    expect(figure).toMatchObject({ tone: 'warn' });

    // The same shard under a 15% threshold completes without a warning.
    await writeFile(join(directory, 'lenient.yaml'), `inputs: ["${source}"]\nwarnRefusedShare: 0.15\n`);
    const lenient = await runHatInProcess(
      environment(),
      'stage',
      'shard',
      '--config',
      join(directory, 'lenient.yaml'),
      '--out',
      uri('lenient-out'),
    );
    expect(lenient.code).toBe(0);
    expect(lenient.stderr).not.toContain('warning:');
  }, 120_000);

  it('names a template that drops tool definitions and moves system messages (DeepSeek-V3.1) in a warning', async () => {
    const source = await input(
      'deepseek',
      Array.from({ length: 4 }, (_unused, index) => accepted(index * 5 + 3)),
    );
    await writeFile(
      join(directory, 'deepseek.yaml'),
      `inputs: ["${source}"]\ntokenizer: { preset: deepseek_v3, chatTemplate: "${join(__dirname, '..', 'shared', 'text', '__fixtures__', 'chat-templates', 'deepseek-ai-DeepSeek-V3.1.jinja')}" }\n`,
    );
    const result = await runHatInProcess(
      environment(),
      'stage',
      'shard',
      '--config',
      join(directory, 'deepseek.yaml'),
      '--out',
      uri('deepseek-out'),
    );
    expect([result.code, result.stderr.slice(-400)]).toEqual([0, expect.any(String)]);
    // The warning names the template the stage was given (its file), not the tokenizer preset.
    expect(result.stderr).toMatch(
      /warning: stage shard: template: check \(the chat template \S*deepseek-ai-DeepSeek-V3\.1\.jinja drops tool definitions/,
    );
    expect(result.stderr).toContain(
      'moves system messages after the first to the start; hook messages are folded into the neighbouring turns instead',
    );
  }, 120_000);
});
