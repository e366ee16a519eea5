import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The benches as a user starts them from dist/: `--help` prints the usage and starts nothing, an
 * unknown flag is refused (exit 2), and a bench that is stopped takes its worker processes with
 * it.
 */

const benchDirectory = join(__dirname, '..', 'dist', 'bench');
// The trainer bench hands its flags to the Python trainer's own parser.
const benches = readdirSync(benchDirectory).filter(
  (name) => (name.endsWith('.bench.js') || name === 'load-100k.js') && name !== 'trainer.bench.js',
);

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function childrenOf(pid: number): number[] {
  try {
    return execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}

it('every bench prints its usage on --help and refuses an unknown flag with exit 2', () => {
  expect(benches.length).toBeGreaterThan(15);
  for (const bench of benches) {
    const help = spawnSync(process.execPath, [join(benchDirectory, bench), '--help'], { encoding: 'utf8' });
    expect([bench, help.status, help.stdout]).toEqual([bench, 0, expect.stringMatching(/^usage: .*dist\/bench\//)]);
    const bogus = spawnSync(process.execPath, [join(benchDirectory, bench), '--no-such-flag'], { encoding: 'utf8' });
    expect([bench, bogus.status, bogus.stderr]).toEqual([
      bench,
      2,
      expect.stringMatching(/^unknown flag --no-such-flag\nusage: /),
    ]);
  }
}, 180_000);

it('a value flag without its value is refused before any work starts', () => {
  const result = spawnSync(process.execPath, [join(benchDirectory, 'load-100k.js'), '--tasks'], { encoding: 'utf8' });
  expect(result.status).toBe(2);
  expect(result.stderr).toMatch(/^--tasks needs a value\n/);
});

it('a load bench stopped with SIGTERM leaves none of its worker processes running', async () => {
  const bench = spawn(
    process.execPath,
    [join(benchDirectory, 'load-100k.js'), '--tasks', '100000', '--tasks-per-part', '1000', '--shared-redis'],
    { stdio: 'ignore', env: { ...process.env, REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' } },
  );
  const exited = new Promise<void>((resolve) => bench.once('exit', () => resolve()));
  let workers: number[] = [];
  const deadline = Date.now() + 60_000;
  while (workers.length === 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    workers = childrenOf(bench.pid as number);
  }
  expect(workers.length).toBeGreaterThan(0);
  // Still running its load: the workers end because the bench is stopped, not because it finished.
  expect(bench.exitCode).toBeNull();
  bench.kill('SIGTERM');
  await exited;
  const gone = Date.now() + 20_000;
  while (workers.some(alive) && Date.now() < gone) await new Promise((resolve) => setTimeout(resolve, 200));
  expect(workers.filter(alive)).toEqual([]);
}, 120_000);
