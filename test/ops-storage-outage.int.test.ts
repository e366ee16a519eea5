import { spawn, spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hatMain } from './support/hat-process';

/**
 * Issue #20: a storage outage (a read-only remount, a full disk) is named by its real cause and,
 * when short, waited out instead of failing the work in seconds. The faults are real: a tmpfs
 * mounted read-only or tiny inside a private mount namespace (`unshare -rm`), no root needed.
 */
const canMount =
  spawnSync('unshare', ['-rm', 'sh', '-c', 'd=$(mktemp -d) && mount -t tmpfs -o size=1m tmpfs "$d"'], {
    stdio: 'ignore',
  }).status === 0;
const describeWithMounts = canMount ? describe : describe.skip;
if (!canMount)
  console.warn('storage outage tests skipped: this machine does not allow a private mount namespace (unshare -rm)');

interface Outcome {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `hat stage fanout-demo` with its output on a fresh tmpfs set up by `mountScript` ($1 = mount point). */
function stageOnMount(
  mountPoint: string,
  mountScript: string,
  env: Record<string, string>,
  stageArgs: string[] = [],
): Promise<Outcome> {
  const script = `${mountScript}\nexec node "$2" stage fanout-demo --out "file://$1/out" --config "$3" ${stageArgs.join(' ')}`;
  const child = spawn(
    'unshare',
    ['-rm', 'sh', '-c', script, 'sh', mountPoint, hatMain, join(mountPoint, '..', 'fanout.yaml')],
    {
      env: { ...process.env, HAT_LOG_LEVEL: 'error', ...env },
    },
  );
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

describeWithMounts('storage outages', () => {
  let directory: string;
  let mountPoint: string;
  beforeEach(async () => {
    directory = await mkdtemp(join(tmpdir(), 'hat-storage-outage-'));
    mountPoint = join(directory, 'mnt');
    await mkdir(mountPoint);
    await writeFile(join(directory, 'fanout.yaml'), 'parts: 3\nrecordsPerPart: 200\n');
  });
  afterEach(async () => {
    await rm(directory, { recursive: true, force: true });
  });

  it('names a read-only file system as STORAGE_READ_ONLY (not ENOENT mkdir) once the retry budget is spent', async () => {
    const outcome = await stageOnMount(mountPoint, 'mount -t tmpfs -o ro,size=4m tmpfs "$1" || exit 97', {
      HAT_STORAGE_RETRY_MS: '1500',
      HAT_LOG_LEVEL: 'warn',
    });
    expect(outcome.code).toBe(1);
    // Each retry is named while it happens: the object, the cause and what is left of the budget.
    const retries = outcome.stderr
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { level: number; msg: string; timeLeftMs?: number })
      .filter((line) => line.msg.startsWith('storage fault'));
    expect(retries.length).toBeGreaterThan(0);
    expect(retries[0].level).toBe(40);
    expect(retries[0].msg).toMatch(
      /^storage fault \(\[STORAGE_READ_ONLY\] put file:\/\/\S+\/out\/\S+: the file system is read-only \(EROFS\).*\); the work waits and tries again in [\d.]+ s, [\d.]+ s of HAT_STORAGE_RETRY_MS left$/,
    );
    expect(retries.every((line) => (line.timeLeftMs ?? -1) >= 0 && (line.timeLeftMs ?? 0) <= 1500)).toBe(true);
    expect(outcome.stderr).toMatch(
      /\[STORAGE_READ_ONLY\] put file:\/\/.*\/out\/.*: the file system is read-only \(EROFS\); remount it read-write/,
    );
    expect(outcome.stderr).not.toContain('ENOENT');
  }, 60_000);

  it('waits out a read-only spell of 16 seconds (longer than every attempt of the stage with its backoff) and completes with every object', async () => {
    const outcome = await stageOnMount(
      mountPoint,
      'mount -t tmpfs -o size=4m tmpfs "$1" && mount -o remount,ro "$1" || exit 97\n(sleep 16; mount -o remount,rw "$1") &',
      { HAT_STORAGE_RETRY_MS: '60000' },
      ['--json'],
    );
    expect(outcome.stderr).not.toMatch(/\[STORAGE_/);
    expect(outcome.code).toBe(0);
    const result = JSON.parse(outcome.stdout) as { manifestUri: string; parts: number; records: number };
    expect(result).toMatchObject({ parts: 3, records: 600 });
    expect(result.manifestUri).toMatch(/\/out\/manifest\.json$/);
  }, 90_000);

  it('names a full disk as STORAGE_FULL at warn while it is waited out, and when the budget is spent', async () => {
    const outcome = await stageOnMount(mountPoint, 'mount -t tmpfs -o size=16k tmpfs "$1" || exit 97', {
      HAT_STORAGE_RETRY_MS: '1000',
      HAT_LOG_LEVEL: 'warn',
    });
    expect(outcome.code).toBe(1);
    // Named at warn while it is waited out, before the budget runs out.
    const retry = outcome.stderr
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { level: number; msg: string })
      .find((line) => line.msg.startsWith('storage fault'));
    expect(retry?.level).toBe(40);
    expect(retry?.msg).toMatch(
      /^storage fault (on put \S+ )?\(\[STORAGE_FULL\] .*no space left on the device \(ENOSPC\).*\); (retry \d+|the work waits and tries again) in [\d.]+ s, [\d.]+ s of HAT_STORAGE_RETRY_MS left$/,
    );
    expect(outcome.stderr).toContain('[STORAGE_FULL]');
    expect(outcome.stderr).toContain('no space left on the device (ENOSPC)');
  }, 60_000);
});
