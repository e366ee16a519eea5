import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { formatFigure } from '../queues/stage-summary';
import { hatMain } from './support/hat-process';
import { runHatInProcess } from './support/hat-in-process';

/** Issue #20: small things a user meets at the terminal. */
describe('CLI papercuts', () => {
  let directory: string;
  beforeEach(async () => {
    directory = await mkdtemp(join(tmpdir(), 'hat-papercuts-'));
  });
  afterEach(async () => {
    await rm(directory, { recursive: true, force: true });
  });

  it('ends quietly with 0 when the reader of its output goes away (| head)', async () => {
    const objects = join(directory, 'objects');
    await mkdir(objects);
    await Promise.all(Array.from({ length: 3_000 }, (_, index) => writeFile(join(objects, `object-${index}.json`), '{}')));
    const child = spawn(process.execPath, [hatMain, 'artifacts', 'ls', `${pathToFileURL(objects).href}/`], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    // Like `head -n 1`: read the first chunk, then close the pipe while hat is still writing.
    child.stdout.once('data', () => child.stdout.destroy());
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(stderr).not.toContain('EPIPE');
    expect(code).toBe(0);
  }, 60_000);

  it('explains the three-slash form for file://host/path (exit 2), in --out and in a run config', async () => {
    const stage = await runHatInProcess({ ...process.env, HAT_LOG_LEVEL: 'silent' }, 'stage', 'fanout-demo', '--out', 'file://tmp/hat-out');
    expect(stage.code).toBe(2);
    expect(stage.stderr).toContain('[BAD_ARTIFACT_URI] artifact URI "file://tmp/hat-out" names the host "tmp" (two slashes after "file:"); a local path takes three: file:///tmp/hat-out');
    const config = join(directory, 'run.yaml');
    await writeFile(config, 'artifacts: file://data/hat\nstages:\n  fanout-demo: { parts: 1 }\n');
    const run = await runHatInProcess({ ...process.env, HAT_LOG_LEVEL: 'silent' }, 'run', config, '--skip-endpoint-checks');
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('a local path takes three: file:///data/hat');
  });

  it('never shows a shortfall as 100% in stage figures (hat runs show, run report)', () => {
    expect(formatFigure({ value: 0.99995, unit: 'ratio' })).toBe('99.995%');
    expect(formatFigure({ value: 1, unit: 'ratio' })).toBe('100.0%');
  });
});
