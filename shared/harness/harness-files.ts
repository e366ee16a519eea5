import { decodeUtf8Strict } from '../artifacts/utf8';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join, relative as relativePath, sep } from 'node:path';
import { BadInputError } from '../errors';

/**
 * The on-disk layout of a harness, as a map of POSIX relative path -> UTF-8 text, so a harness
 * can come from a directory, from S3 objects or from memory through the same loader.
 */
export type HarnessFiles = Record<string, string>;

export const HARNESS_FILE = 'harness.yaml';
export const SKILLS_DIR = 'skills';
export const TOOLS_DIR = 'tools';

export const skillFilePath = (id: string): string => `${SKILLS_DIR}/${id}.md`;
export const toolFilePath = (name: string): string => `${TOOLS_DIR}/${name}.json`;

const FRONT_MATTER_FENCE = '---';

/**
 * Splits `---\n<yaml>\n---\n<body>`. One blank line after the closing fence and one trailing
 * newline belong to the layout, not the body, so `joinFrontMatter` and this are exact inverses.
 */
export function splitFrontMatter(text: string): { frontMatter: string; body: string } | undefined {
  const lines = text.split('\n');
  if (lines[0]?.trimEnd() !== FRONT_MATTER_FENCE) return undefined;
  const close = lines.findIndex((line, index) => index > 0 && line.trimEnd() === FRONT_MATTER_FENCE);
  if (close < 0) return undefined;
  let body = lines.slice(close + 1).join('\n');
  if (body.startsWith('\n')) body = body.slice(1);
  if (body.endsWith('\n')) body = body.slice(0, -1);
  return { frontMatter: lines.slice(1, close).join('\n'), body };
}

/** `frontMatter` is YAML ending in a newline. */
export function joinFrontMatter(frontMatter: string, body: string): string {
  return `${FRONT_MATTER_FENCE}\n${frontMatter}${FRONT_MATTER_FENCE}\n\n${body}\n`;
}

function isHarnessPath(path: string): boolean {
  return path === HARNESS_FILE || path.startsWith(`${SKILLS_DIR}/`) || path.startsWith(`${TOOLS_DIR}/`);
}

/**
 * Reads the files of a harness directory: `harness.yaml` and everything under `skills/` and
 * `tools/` (other files, such as a README, are not part of the harness). Line endings are
 * normalized to `\n`.
 */
export async function readHarnessFiles(directory: string): Promise<HarnessFiles> {
  const info = await stat(directory).catch(() => undefined);
  if (!info?.isDirectory()) {
    throw new BadInputError(
      'BAD_HARNESS',
      `${directory}: not a harness directory; pass a directory holding ${HARNESS_FILE}, ${SKILLS_DIR}/ and ${TOOLS_DIR}/`,
    );
  }
  const files: HarnessFiles = {};
  const entries = await readdir(directory, { recursive: true, withFileTypes: true });
  for (const entry of entries) {
    if (!entry.isFile()) continue;
    const relative = relativePath(directory, join(entry.parentPath, entry.name)).split(sep).join('/');
    if (!isHarnessPath(relative)) continue;
    files[relative] = decodeUtf8Strict(await readFile(join(directory, relative)), join(directory, relative)).replace(
      /\r\n/g,
      '\n',
    );
  }
  return files;
}

/**
 * Writes harness files into a directory, each through a temporary name and a rename so a reader
 * never sees half a file, and removes skill/tool files left from an earlier harness there (they
 * would otherwise be loaded as part of this one). Other files are left alone.
 */
export async function writeHarnessFiles(files: HarnessFiles, directory: string): Promise<void> {
  await mkdir(directory, { recursive: true });
  for (const [relative, text] of Object.entries(files).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const target = join(directory, relative);
    await mkdir(dirname(target), { recursive: true });
    const temporary = `${target}.tmp-${process.pid}`;
    await writeFile(temporary, text, 'utf8');
    await rename(temporary, target);
  }
  const existing = await readHarnessFiles(directory);
  for (const relative of Object.keys(existing)) {
    if (!(relative in files)) await rm(join(directory, relative));
  }
}
