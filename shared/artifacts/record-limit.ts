import { BadInputError } from '../errors';

/**
 * Default largest JSONL record (one line, decompressed), bytes: 16 MiB. The pipeline's own
 * records are far smaller (a task is a few KB, a long trajectory with per-token logprobs well
 * under 1 MB); a line this long is a file that is not JSON Lines or a field that does not belong.
 */
export const defaultLargestRecordBytes = 16 * 1024 * 1024;

let largest = defaultLargestRecordBytes;

/**
 * Sets the largest record a reader accepts, for the whole process: HAT_MAX_RECORD_BYTES, applied
 * where a process opens its stores (createStoreCache), since readers get a store and not the env.
 */
export function setLargestRecordBytes(bytes: number): void {
  largest = bytes;
}

export function largestRecordBytes(): number {
  return largest;
}

/**
 * A line longer than the limit: without it a file with no newlines (a binary uploaded by mistake)
 * would be gathered into one string until the process ran out of memory.
 */
export function recordTooLarge(uri: string, lineNumber: number): BadInputError {
  return new BadInputError(
    'RECORD_TOO_LARGE',
    `${uri}: line ${lineNumber} is longer than the largest record size, ${largest} bytes (HAT_MAX_RECORD_BYTES); ` +
      'check that the file is JSON Lines (one record per line), split the record, or raise HAT_MAX_RECORD_BYTES',
  );
}

/** Throws RECORD_TOO_LARGE for the first line of a whole JSONL text longer than the limit. */
export function checkRecordSizes(bytes: Uint8Array, uri: string): void {
  if (bytes.length <= largest) return;
  let start = 0;
  let lineNumber = 1;
  while (start <= bytes.length) {
    const newline = bytes.indexOf(10, start);
    const end = newline === -1 ? bytes.length : newline;
    if (end - start > largest) throw recordTooLarge(uri, lineNumber);
    if (newline === -1) return;
    start = newline + 1;
    lineNumber += 1;
  }
}
