import { PY_SPACE, pyStrip, pySplitWhitespace } from './python-text';

describe('pyStrip: Python str.strip()', () => {
  it("strips exactly the characters Python's \\s class holds, at both ends, over the whole BMP", () => {
    const space = new RegExp(`^${PY_SPACE}$`, 'u');
    // Every code point is checked; the mismatches are collected and compared once (63,488 expect
    // calls took seconds), so a failure lists every wrong character.
    const mismatches: Array<{ code: string; stripped: string; expected: string }> = [];
    for (let code = 0; code <= 0xffff; code++) {
      if (code >= 0xd800 && code <= 0xdfff) continue;
      const char = String.fromCharCode(code);
      const expected = space.test(char) ? 'a b' : `${char}a b${char}`;
      const stripped = pyStrip(`${char}a b${char}`);
      if (stripped !== expected) mismatches.push({ code: code.toString(16), stripped, expected });
    }
    expect(mismatches).toEqual([]);
  });

  it('keeps inner whitespace, empties whitespace-only text, and splits as str.split()', () => {
    expect(pyStrip(' \t\u3000 hello \u2028 world \u00a0\n')).toBe('hello \u2028 world');
    expect(pyStrip('\u200b x \u200b')).toBe('\u200b x \u200b');
    expect(pyStrip(' \n\t ')).toBe('');
    expect(pyStrip('')).toBe('');
    expect(pySplitWhitespace('  a\u3000b\n\nc  ')).toEqual(['a', 'b', 'c']);
  });
});
