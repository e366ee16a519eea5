import { PassThrough } from 'node:stream';
import { CliContext } from '../../cli/cli-context';
import { runCli } from '../../cli/main';

/** What a user sees from one `hat` invocation. */
export interface InProcessHatResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs `hat <argv>` in this process (no build needed, unlike hat-process.ts) with the given
 * environment, and captures its exit code and output.
 */
export async function runHatInProcess(environment: NodeJS.ProcessEnv, ...argv: string[]): Promise<InProcessHatResult> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const output = { stdout: '', stderr: '' };
  stdout.on('data', (chunk: Buffer) => (output.stdout += chunk.toString()));
  stderr.on('data', (chunk: Buffer) => (output.stderr += chunk.toString()));
  const code = await runCli(argv, new CliContext(stdout, stderr, environment));
  return { code, ...output };
}
