import type { ChildProcess } from 'node:child_process';

/**
 * A bench's command line, checked against its usage line before any work starts: `--help` (or
 * `-h`) prints the usage and exits 0; an unknown flag, a stray argument or a flag without its
 * value prints what is wrong and the usage and exits 2. The usage line is the one source of
 * the flags: `[--name <value>]` or `[--name 500]` takes a value, `[--name]` does not.
 */
export function checkBenchFlags(usage: string, argv: string[] = process.argv.slice(2)): void {
  const takesValue = new Map<string, boolean>();
  for (const match of usage.matchAll(/\[(--[a-z0-9-]+)( [^\]]+)?\]/g)) takesValue.set(match[1], match[2] !== undefined);
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`usage: ${usage}\n`);
    process.exit(0);
  }
  const refuse = (problem: string): never => {
    process.stderr.write(`${problem}\nusage: ${usage}\n`);
    process.exit(2);
  };
  for (let index = 0; index < argv.length; index++) {
    const argument = argv[index];
    const value = takesValue.get(argument);
    if (value === undefined)
      refuse(argument.startsWith('-') ? `unknown flag ${argument}` : `unexpected argument ${argument}`);
    if (!value) continue;
    const next = argv[index + 1];
    if (next === undefined || next.startsWith('--')) refuse(`${argument} needs a value`);
    index++;
  }
}

const children = new Set<ChildProcess>();
let guarded = false;

function stopChildren(): void {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
}

/**
 * Ends `child` when this process ends: on a normal exit, an uncaught error (a closed stdout
 * pipe included), SIGINT, SIGTERM or SIGHUP. A bench's workers and servers never outlive it
 * (except when it is killed with SIGKILL, which no process can catch).
 */
export function endsWithThisProcess<T extends ChildProcess>(child: T): T {
  children.add(child);
  child.once('exit', () => children.delete(child));
  if (!guarded) {
    guarded = true;
    process.on('exit', stopChildren);
    // A reader that went away (`bench | head`): stop quietly instead of dying on EPIPE mid-run.
    process.stdout.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code !== 'EPIPE') throw error;
      process.exit(1);
    });
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const)
      process.once(signal, () => {
        stopChildren();
        process.exit(128 + ({ SIGINT: 2, SIGTERM: 15, SIGHUP: 1 } as const)[signal]);
      });
  }
  return child;
}
