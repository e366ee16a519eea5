import { isUtf8 } from 'node:buffer';
import { BadInputError } from '../errors';

/**
 * Index of the first byte that does not belong to a well-formed UTF-8 sequence (only called on
 * a line `isUtf8` refused, so speed does not matter). Overlong forms, surrogates and code points
 * past U+10FFFF count as invalid, as they do for `isUtf8` and TextDecoder's fatal mode.
 */
export function firstInvalidUtf8Byte(bytes: Uint8Array): number {
  let index = 0;
  while (index < bytes.length) {
    const lead = bytes[index] ?? 0;
    const [length, min, max] =
      lead < 0x80
        ? [1, 0, 0]
        : lead >= 0xc2 && lead <= 0xdf
          ? [2, 0x80, 0x7ff]
          : lead >= 0xe0 && lead <= 0xef
            ? [3, 0x800, 0xffff]
            : lead >= 0xf0 && lead <= 0xf4
              ? [4, 0x10000, 0x10ffff]
              : [0, 0, 0];
    if (length === 0) return index;
    if (length === 1) {
      index += 1;
      continue;
    }
    let codePoint = lead & (0xff >> (length + 1));
    for (let offset = 1; offset < length; offset += 1) {
      const next = bytes[index + offset];
      if (next === undefined || (next & 0xc0) !== 0x80) return index;
      codePoint = (codePoint << 6) | (next & 0x3f);
    }
    if (codePoint < min || codePoint > max || (codePoint >= 0xd800 && codePoint <= 0xdfff)) return index;
    index += length;
  }
  return bytes.length;
}

/**
 * The text of a whole input file (a config, a harness file), refusing bytes that are not UTF-8
 * with their line and byte offset instead of turning them into U+FFFD.
 */
export function decodeUtf8Strict(bytes: Uint8Array, source: string): string {
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  checkUtf8(buffer, source);
  return buffer.toString('utf8');
}

/**
 * Throws `BAD_ENCODING` naming the source, line and byte offset of the first byte that is not
 * UTF-8. `isUtf8` is as strict as a fatal TextDecoder and native, so a whole object is checked in
 * one pass before its lines are decoded.
 */
export function checkUtf8(bytes: Uint8Array, source: string): void {
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (isUtf8(buffer)) return;
  const at = firstInvalidUtf8Byte(buffer);
  const lineStart = buffer.lastIndexOf(10, at - 1) + 1;
  let line = 1;
  for (let index = buffer.indexOf(10); index !== -1 && index < at; index = buffer.indexOf(10, index + 1)) line += 1;
  throw badEncodingError(source, line, at - lineStart, at);
}

/** `BAD_ENCODING` for the byte at `byteOfLine` (0-based) of line `line`, `fileOffset` into the file. */
export function badEncodingError(source: string, line: number, byteOfLine: number, fileOffset: number): BadInputError {
  return new BadInputError(
    'BAD_ENCODING',
    `${source}: line ${line}: byte ${byteOfLine + 1} of the line (byte offset ${fileOffset} of the file) is not valid UTF-8; ` +
      'inputs must be UTF-8: convert the file (e.g. `iconv -f GBK -t UTF-8`) rather than let bytes be replaced',
  );
}
