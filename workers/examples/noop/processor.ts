/**
 * noop (example stage). Input: a label and manifest URIs. Writes nothing. Idempotent: reads only.
 * Retried: everything but a missing or invalid input manifest (bad input, fails once).
 */
import { defineStage, type StageDeps } from '../../../queues/stage-kit/define-stage';
import { noopContract, type NoopInput, type NoopOutput } from './contract';
import { readManifest } from '../../../shared/artifacts/manifest';
import { BadInputError } from '../../../shared/errors';

export function createNoopProcessor(deps: StageDeps) {
  return async (input: NoopInput): Promise<NoopOutput> => {
    const inputs = [];
    for (const uri of input.inputs) {
      const { store, key } = deps.openObject(uri);
      if (!(await store.head(key))) {
        throw new BadInputError(
          'INPUT_MANIFEST_MISSING',
          `${uri} does not exist; run the stage that writes it first, or fix inputs[]`,
        );
      }
      const manifest = await readManifest(store, key);
      inputs.push({ uri, objects: manifest.objects.length });
    }
    return { label: input.label, inputs };
  };
}

export const noopStage = defineStage({ ...noopContract, createProcessor: createNoopProcessor });
