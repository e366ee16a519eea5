import { pathToFileURL } from 'node:url';
import { fileUriToPath } from '../../shared/artifacts/artifact-uri';
import { stageManifestKey, stagePrefix } from '../../shared/artifacts/artifact-layout';

/**
 * Where a run's objects go, as keys and as URIs under the run's artifact root:
 * `runs/<runId>/<stage>/...` per stage (shared/artifacts/artifact-layout.ts), plus the run's own
 * `run-report.json`, `run-report.html` and `run-manifest.json` (written last).
 */

/** The root URI as stores spell it (file URIs percent-encoded, no trailing slash). */
export function normalizeArtifactsRoot(uri: string): string {
  const trimmed = uri.replace(/\/+$/, '');
  return trimmed.startsWith('file://') ? pathToFileURL(fileUriToPath(trimmed)).href.replace(/\/+$/, '') : trimmed;
}

export function runManifestKey(runId: string): string {
  return `runs/${runId}/run-manifest.json`;
}

export function runReportKeys(runId: string): { json: string; html: string } {
  return { json: `runs/${runId}/run-report.json`, html: `runs/${runId}/run-report.html` };
}

/** Keys and URIs of one run under one artifact root. */
export function runLayout(artifactsRoot: string, runId: string) {
  const root = normalizeArtifactsRoot(artifactsRoot);
  const uri = (key: string) => `${root}/${key}`;
  return {
    root,
    stagePrefix: (stage: string) => stagePrefix(runId, stage),
    stageOutputUri: (stage: string) => uri(stagePrefix(runId, stage)),
    stageManifestUri: (stage: string) => uri(stageManifestKey(runId, stage)),
    runManifestUri: uri(runManifestKey(runId)),
    reportJsonUri: uri(runReportKeys(runId).json),
    reportHtmlUri: uri(runReportKeys(runId).html),
  };
}
