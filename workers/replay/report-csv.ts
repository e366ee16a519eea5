import type { ReplayCallRecord, ReplaySessionRecord, ReplayTurnRecord } from './replay-records';

const callColumns = [
  'sessionId',
  'sessionIndex',
  'callIndex',
  'messageIndex',
  'part',
  'status',
  'errorCode',
  'intendedMs',
  'dispatchMs',
  'sentMs',
  'endMs',
  'scheduleLagMs',
  'queueMs',
  'retryMs',
  'ttftMs',
  'tpotMs',
  'e2elMs',
  'ttftFromIntendedMs',
  'e2elFromIntendedMs',
  'clientOverheadMs',
  'writeMs',
  'outputTokens',
  'outputTokensSource',
  'promptTokens',
  'cachedPromptTokens',
  'chunkCount',
  'finishReason',
  'attempts',
  'thinkMs',
  'recordedTtftMs',
  'recordedE2eMs',
  'recordedOutputTokens',
  'divergence',
  'error',
] as const;

const sessionColumns = [
  'sessionId',
  'sessionIndex',
  'part',
  'status',
  'calls',
  'intendedStartMs',
  'startMs',
  'endMs',
  'e2eMs',
  'e2eFromIntendedMs',
  'finalAnswerTtftMs',
  'finalAnswerTtftFromIntendedMs',
  'modelMs',
  'toolMs',
  'overheadMs',
  'liveSteps',
  'liveDivergedSteps',
  'error',
] as const;

const turnColumns = [
  'sessionId',
  'sessionIndex',
  'turnIndex',
  'part',
  'status',
  'calls',
  'intendedStartMs',
  'startMs',
  'firstTokenAtMs',
  'endMs',
  'firstTokenMs',
  'firstTokenFromIntendedMs',
  'responseMs',
  'responseFromIntendedMs',
  'toolMs',
  'modelMs',
] as const;

/** One row per viewer turn (`turns.csv`). */
export function turnsCsv(turns: readonly ReplayTurnRecord[]): string {
  return toCsv(
    turnColumns,
    turns.map((turn) => turnColumns.map((column) => turn[column])),
  );
}

/** One row per model call (`requests.csv`): every figure of the call, blank where it has none. */
export function callsCsv(calls: readonly ReplayCallRecord[]): string {
  const rows = calls.map((call) =>
    callColumns.map((column) => {
      if (column === 'divergence') return call.divergence?.kind ?? '';
      return call[column];
    }),
  );
  return toCsv(callColumns, rows);
}

/** One row per session (`sessions.csv`). */
export function sessionsCsv(sessions: readonly ReplaySessionRecord[]): string {
  const rows = sessions.map((session) =>
    sessionColumns.map((column) => {
      if (column === 'liveSteps') return session.live?.steps;
      if (column === 'liveDivergedSteps') return session.live?.divergedSteps;
      return session[column];
    }),
  );
  return toCsv(sessionColumns, rows);
}

/** RFC 4180: fields with a comma, quote or line break are quoted, quotes doubled; numbers at 3 decimals. */
function toCsv(header: readonly string[], rows: unknown[][]): string {
  const field = (value: unknown): string => {
    if (value === undefined || value === null) return '';
    const text =
      typeof value === 'number' ? (Number.isInteger(value) ? String(value) : value.toFixed(3)) : String(value);
    return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
  };
  return `${[header.join(','), ...rows.map((row) => row.map(field).join(','))].join('\n')}\n`;
}
