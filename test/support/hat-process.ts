import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';

/** The compiled CLI (test/global-setup.ts builds it when stale). */
export const hatMain = join(__dirname, '..', '..', 'dist', 'cli', 'main.js');

export interface HatResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** A running `hat` process whose output is collected as it comes. */
export interface HatProcess {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves when the process has exited. */
  exited: Promise<HatResult>;
}

export function startHat(
  args: string[],
  env: Record<string, string | undefined>,
  options: { cwd?: string } = {},
): HatProcess {
  const child = spawn(process.execPath, [hatMain, ...args], {
    env: { ...process.env, ...env },
    cwd: options.cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (text: string) => (stdout += text));
  child.stderr?.setEncoding('utf8').on('data', (text: string) => (stderr += text));
  const exited = new Promise<HatResult>((resolve) =>
    child.once('close', (code, signal) => resolve({ code, signal, stdout, stderr })),
  );
  return { child, stdout: () => stdout, stderr: () => stderr, exited };
}

/** Runs `hat` to completion (killed after `timeoutMs`). */
export async function runHat(
  args: string[],
  env: Record<string, string | undefined>,
  options: { cwd?: string; timeoutMs?: number } = {},
): Promise<HatResult> {
  const hat = startHat(args, env, options);
  const timer = setTimeout(() => hat.child.kill('SIGKILL'), options.timeoutMs ?? 60_000);
  try {
    return await hat.exited;
  } finally {
    clearTimeout(timer);
  }
}
