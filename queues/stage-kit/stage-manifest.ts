import { writeManifest, type ManifestInput } from '../../shared/artifacts/manifest';
import type { StageDeps } from './define-stage';

/**
 * Writes the stage's `manifest.json` (last, after every object it lists): the stage, run and
 * creation time come from the job's deps, so a stage's finish names only what it wrote.
 */
export function writeStageManifest(
  deps: Pick<StageDeps, 'store' | 'output' | 'stage' | 'run' | 'clock'>,
  input: Omit<ManifestInput, 'stage' | 'runId'>,
): ReturnType<typeof writeManifest> {
  return writeManifest(
    deps.store,
    deps.output.manifestKey,
    { stage: deps.stage, runId: deps.run.id, ...input },
    { clock: () => new Date(deps.clock.now()) },
  );
}
