import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Builds dist/ before tests that spawn the compiled CLI or load compiled sandboxed processors,
 * only when a source is newer than the last build (a stamp file), so an up-to-date tree costs a
 * directory walk. Type errors do not stop the build (tsc still emits); `npm run typecheck` is
 * where they fail. Set HAT_SKIP_BUILD=1 to skip.
 */
const root = join(__dirname, '..');
const sourceFolders = ['cli', 'queues', 'workers', 'shared', 'serve', 'bench'];
const stampFile = join(root, 'dist', '.build-stamp');
const lockDirectory = join(root, 'dist', '.build-lock');

function newestSource(directory: string): number {
  let newest = 0;
  if (!existsSync(directory)) return newest;
  for (const entry of readdirSync(directory, { withFileTypes: true })) {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestSource(path));
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts'))
      newest = Math.max(newest, statSync(path).mtimeMs);
  }
  return newest;
}

function isStale(): boolean {
  if (!existsSync(stampFile) || !existsSync(join(root, 'dist', 'cli', 'main.js'))) return true;
  const built = statSync(stampFile).mtimeMs;
  const inputs = [
    ...sourceFolders.map((folder) => newestSource(join(root, folder))),
    ...['tsconfig.json', 'tsconfig.build.json', 'tsconfig.dev.json', 'package.json'].map(
      (file) => statSync(join(root, file)).mtimeMs,
    ),
  ];
  return Math.max(...inputs) > built;
}

async function withBuildLock(work: () => void): Promise<void> {
  mkdirSync(join(root, 'dist'), { recursive: true });
  const deadline = Date.now() + 180_000;
  for (;;) {
    try {
      mkdirSync(lockDirectory);
      break;
    } catch {
      // Another jest process is building; a lock older than the deadline is stale.
      const lockedAt = statSync(lockDirectory, { throwIfNoEntry: false })?.mtimeMs ?? Date.now();
      if (Date.now() > deadline || Date.now() - lockedAt > 180_000)
        rmSync(lockDirectory, { recursive: true, force: true });
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
  try {
    work();
  } finally {
    rmSync(lockDirectory, { recursive: true, force: true });
  }
}

export default async function globalSetup(): Promise<void> {
  if (process.env.HAT_SKIP_BUILD) return;
  if (!isStale()) return;
  await withBuildLock(() => {
    if (!isStale()) return;
    const startedAt = new Date();
    const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
    const result = spawnSync(
      process.execPath,
      // Build mode, as `make build-dev`: both keep dist/tsconfig.dev.tsbuildinfo, so neither redoes the other's work.
      [tsc, '-b', 'tsconfig.dev.json'],
      { cwd: root, encoding: 'utf8' },
    );
    if (!existsSync(join(root, 'dist', 'cli', 'main.js'))) {
      throw new Error(`building dist/ for the tests failed:\n${result.stdout}${result.stderr}`);
    }
    if (result.status !== 0)
      process.stderr.write(
        `\nnote: tsc reported type errors while building dist/ for the tests (outputs were still written):\n${result.stdout.split('\n').slice(0, 10).join('\n')}\n`,
      );
    writeFileSync(stampFile, startedAt.toISOString());
    // The stamp's mtime must be the build's start, so sources edited during the build count as newer.
    utimesSync(stampFile, startedAt, startedAt);
  });
}
