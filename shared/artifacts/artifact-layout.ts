import { validateObjectKey } from './object-key';

/** `runs/<runId>/<stage>/`: where one stage of one run keeps its output. */
export function stagePrefix(runId: string, stage: string): string {
  return validateObjectKey(`runs/${runId}/${stage}`) + '/';
}

/** `runs/<runId>/<stage>/manifest.json`: written last; present means the stage output is complete. */
export function stageManifestKey(runId: string, stage: string): string {
  return `${stagePrefix(runId, stage)}manifest.json`;
}

/** `runs/<runId>/<stage>/<part>.<extension>`, e.g. `runs/r1/collect/part-0003.jsonl.gz`. */
export function stagePartKey(runId: string, stage: string, part: string, extension: string): string {
  return validateObjectKey(`${stagePrefix(runId, stage)}${part}.${extension}`);
}
