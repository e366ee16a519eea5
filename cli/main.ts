#!/usr/bin/env node
import { Command, CommanderError } from 'commander';
import { CliContext } from './cli-context';
import { refuseCommandLineCredentials } from './command-line-credentials';
import { commandModules } from './commands';
import { redisFullError } from '../queues/bullmq/redis-full';
import { redactUrlCredentials } from '../shared/config/url-credentials';
import { HatError, exitCodeOf } from '../shared/errors';
import { version } from '../shared/version';

/** Builds the `hat` program (exported for in-process tests). */
export function buildProgram(context: CliContext): Command {
  const program = new Command('hat')
    .description('HAT pipeline: data, environments and measurements for Harness-Aware Training')
    .version(version)
    .exitOverride()
    .configureOutput({
      writeOut: (text) => context.stdout.write(text),
      writeErr: (text) => context.stderr.write(text),
    })
    // Runs before every command's action, subcommands included.
    .hook('preAction', (_program, command) => refuseCommandLineCredentials(command));
  for (const register of commandModules) register(program, context);
  return program;
}

/** Runs the CLI; the one place errors become exit codes (0 ok, 1 work failed, 2 bad usage/input). */
export async function runCli(argv: string[], context = new CliContext()): Promise<number> {
  const program = buildProgram(context);
  try {
    await program.parseAsync(argv, { from: 'user' });
    return 0;
  } catch (error) {
    if (error instanceof CommanderError) {
      if (
        error.code === 'commander.helpDisplayed' ||
        error.code === 'commander.version' ||
        error.code === 'commander.help'
      )
        return 0;
      return error.exitCode === 0 ? 0 : 2;
    }
    const shown = redisFullError(error) ?? error;
    const code = exitCodeOf(shown);
    const message = shown instanceof Error ? shown.message : String(shown);
    context.stderr.write(`hat: ${redactUrlCredentials(message)}\n`);
    if (!HatError.isInstance(error) && error instanceof Error && error.stack && process.env.HAT_DEBUG)
      context.stderr.write(`${redactUrlCredentials(error.stack)}\n`);
    return code;
  }
}

/**
 * A reader that stops early (`hat runs show … | head`) closes the pipe: that is not a failure of
 * the command, so it ends quietly with 0 instead of crashing on an unhandled EPIPE.
 */
function exitQuietlyOnClosedPipe(stream: NodeJS.WriteStream): void {
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code === 'EPIPE') process.exit(0);
    throw error;
  });
}

if (require.main === module) {
  exitQuietlyOnClosedPipe(process.stdout);
  runCli(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      process.stderr.write(`hat: ${redactUrlCredentials(String(error))}\n`);
      process.exitCode = 1;
    },
  );
}
