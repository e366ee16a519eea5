import type { StageDeps } from './define-stage';
import { fileUriToPath } from '../../shared/artifacts/artifact-uri';
import { decodeUtf8Strict } from '../../shared/artifacts/utf8';
import { BadInputError } from '../../shared/errors';
import { HARNESS_FILE, readHarnessFiles, type HarnessFiles } from '../../shared/harness/harness-files';
import type { Harness } from '../../shared/harness/harness-types';
import { loadHarnessFromFiles } from '../../shared/harness/load-harness';
import { sampleHarnessDirectory } from '../../shared/harness/sample-harness';

/**
 * Loads a harness named by a stage config: a local directory, a `file://` directory or an
 * `s3://` prefix holding `harness.yaml`, `skills/` and `tools/` (listed and read through the
 * artifact store); none means the sample live-host harness. Validation is the harness loader's:
 * every problem at once, exit 2.
 */
export async function loadHarnessFromUri(
  uri: string | undefined,
  openObject: StageDeps['openObject'],
): Promise<Harness> {
  if (uri === undefined)
    return loadHarnessFromFiles(await readHarnessFiles(sampleHarnessDirectory()), 'sample live-host harness');
  if (!uri.startsWith('s3://')) {
    const directory = uri.startsWith('file:') ? fileUriToPath(uri) : uri;
    return loadHarnessFromFiles(await readHarnessFiles(directory), directory);
  }
  const { store, key } = openObject(uri.replace(/\/+$/, ''));
  const prefix = key === '' ? '' : `${key}/`;
  const files: HarnessFiles = {};
  for await (const object of store.list(prefix)) {
    const relative = object.key.slice(prefix.length);
    if (relative === HARNESS_FILE || relative.startsWith('skills/') || relative.startsWith('tools/')) {
      files[relative] = decodeUtf8Strict(await store.getBuffer(object.key), store.uriOf(object.key)).replace(
        /\r\n/g,
        '\n',
      );
    }
  }
  if (!(HARNESS_FILE in files))
    throw new BadInputError(
      'BAD_HARNESS',
      `${uri}: no ${HARNESS_FILE} under this prefix; point harness at the prefix holding harness.yaml, skills/ and tools/`,
    );
  return loadHarnessFromFiles(files, uri);
}
