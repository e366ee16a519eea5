import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';

function readPackageVersion(): string {
  for (const up of ['..', '../..']) {
    try {
      return (JSON.parse(readFileSync(join(__dirname, up, 'package.json'), 'utf8')) as { version: string }).version;
    } catch {
      // try the next candidate: compiled code lives one level deeper than sources
    }
  }
  return '0.0.0';
}

function readGitCommit(): string | undefined {
  if (process.env.HAT_CODE_VERSION) return process.env.HAT_CODE_VERSION;
  try {
    return execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], {
      cwd: __dirname,
      stdio: ['ignore', 'pipe', 'ignore'],
    })
      .toString()
      .trim();
  } catch {
    return undefined;
  }
}

/** Package version. */
export const version = readPackageVersion();
let recordedCodeVersion: string | undefined;

/**
 * Code version recorded in manifests: package version plus git commit when known (or
 * HAT_CODE_VERSION). Read on first use (it runs git), so a process that writes no manifest never
 * starts git.
 */
export function codeVersion(): string {
  if (recordedCodeVersion === undefined) {
    const commit = readGitCommit();
    recordedCodeVersion = commit ? `${version}+${commit}` : version;
  }
  return recordedCodeVersion;
}
