/**
 * How much of a text's UTF-8 is CJK: the bytes of Han ideographs (with the extension blocks),
 * kana, bopomofo, CJK punctuation (、。「」) and full-width forms (，：？！（）), the characters
 * Chinese text is written in and UTF-8 spends three bytes (four beyond the BMP) on. Emoji, Latin
 * letters, digits and JSON punctuation are not CJK. Written by hand: a scan of code points is
 * all it takes, and the ranges are the point of it.
 */

function isCjk(codePoint: number): boolean {
  return (
    (codePoint >= 0x2e80 && codePoint <= 0x2fdf) || // radicals
    (codePoint >= 0x3000 && codePoint <= 0x31bf) || // CJK punctuation, kana, bopomofo
    (codePoint >= 0x3400 && codePoint <= 0x4dbf) || // extension A
    (codePoint >= 0x4e00 && codePoint <= 0x9fff) || // unified ideographs
    (codePoint >= 0xf900 && codePoint <= 0xfaff) || // compatibility ideographs
    (codePoint >= 0xfe30 && codePoint <= 0xfe4f) || // compatibility forms
    (codePoint >= 0xff00 && codePoint <= 0xffef) || // half-width and full-width forms
    (codePoint >= 0x20000 && codePoint <= 0x3134f) // extensions B-H
  );
}

/** UTF-8 bytes of the text and how many of them are CJK characters. */
export function cjkBytes(text: string): { bytes: number; cjk: number } {
  let bytes = 0;
  let cjk = 0;
  for (const char of text) {
    const codePoint = char.codePointAt(0) as number;
    const size = codePoint < 0x80 ? 1 : codePoint < 0x800 ? 2 : codePoint < 0x10000 ? 3 : 4;
    bytes += size;
    if (isCjk(codePoint)) cjk += size;
  }
  return { bytes, cjk };
}

/** The CJK share of a text's UTF-8 bytes (0 for an empty text). */
export function cjkShare(text: string): number {
  const { bytes, cjk } = cjkBytes(text);
  return bytes === 0 ? 0 : cjk / bytes;
}
