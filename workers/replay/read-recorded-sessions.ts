import { createHash } from 'node:crypto';
import type { ArtifactStore } from '../../shared/artifacts/artifact-store';
import { readJsonlTextLines } from '../../shared/artifacts/jsonl-reader';
import { expandInputs } from '../../queues/stage-kit/stage-inputs';
import { parseRecordedSession, type ReplaySession, type UnreplayableSession } from './recorded-session';

/** Opens any artifact URI (StageDeps.openObject). */
export type OpenObject = (uri: string) => { store: ArtifactStore; key: string };

export interface RecordedSessions {
  /** Replayable sessions in input order (inputs in the order given, lines in file order). */
  sessions: ReplaySession[];
  unreplayable: UnreplayableSession[];
  /** Every object read, with the sha256 of its stored bytes (lineage). */
  objects: Array<{ uri: string; sha256: string }>;
}

/**
 * Reads recorded sessions from JSONL objects (gzip when the key ends in `.gz`) or from stage
 * manifests (`.../manifest.json`: every JSONL object it lists). A line that is not JSON, or not
 * a replayable session, is reported and skipped; a missing input is bad input (nothing to do).
 */
export async function readRecordedSessions(
  inputs: readonly string[],
  openObject: OpenObject,
): Promise<RecordedSessions> {
  const result: RecordedSessions = { sessions: [], unreplayable: [], objects: [] };
  const seen = new Set<string>();
  for (const { uri } of await expandInputs(inputs, openObject, 'replay.inputs', 'trajectories')) {
    const { store, key } = openObject(uri);
    const hash = createHash('sha256');
    for await (const line of readJsonlTextLines(store, key, { onStoredBytes: (chunk) => hash.update(chunk) }))
      if (line.text.trim() !== '') addRecord(result, seen, line.text, `${uri}: line ${line.lineNumber}`);
    result.objects.push({ uri, sha256: hash.digest('hex') });
  }
  return result;
}

/** One line: a session, or the reason it cannot be replayed. */
function addRecord(result: RecordedSessions, seen: Set<string>, line: string, where: string): void {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch (error) {
    result.unreplayable.push({
      source: where,
      reason: 'malformed_record',
      detail: `not valid JSON (${(error as Error).message})`,
    });
    return;
  }
  const parsed = parseRecordedSession(value, where);
  if (!parsed.ok) {
    result.unreplayable.push(parsed.unreplayable);
  } else if (seen.has(parsed.session.id)) {
    result.unreplayable.push({
      sessionId: parsed.session.id,
      source: where,
      reason: 'duplicate_id',
      detail: 'an earlier record has the same id; ids must be unique',
    });
  } else {
    seen.add(parsed.session.id);
    result.sessions.push(parsed.session);
  }
}
