import fc from 'fast-check';
import {
  PythonFloat,
  PythonInteger,
  parseJsonKeepingFloats,
  pythonFloatRepr,
  pythonJson,
  pythonRepr,
  pythonStringRepr,
  pythonStrip,
} from './python-values';

// Expected texts are Python 3.11's repr() of the same values.
describe('python-values', () => {
  test('floats print as Python repr() prints them', () => {
    const cases: Array<[number, string]> = [
      [99, '99.0'],
      [0.1, '0.1'],
      [1e16, '1e+16'],
      [1e15, '1000000000000000.0'],
      [123456789012345.6, '123456789012345.6'],
      [1.5e-7, '1.5e-07'],
      [0.0001, '0.0001'],
      [0.00001, '1e-05'],
      [-0, '-0.0'],
      [2.5e-300, '2.5e-300'],
      [1.7976931348623157e308, '1.7976931348623157e+308'],
      [5e-324, '5e-324'],
      [1 / 3, '0.3333333333333333'],
      [-1234.5, '-1234.5'],
    ];
    expect(cases.map(([value]) => [value, pythonFloatRepr(value)])).toEqual(cases);
  });

  test('float reprs read back to the same number', () => {
    fc.assert(
      fc.property(fc.double({ noNaN: true, noDefaultInfinity: true }), (value) => {
        expect(Object.is(Number(pythonFloatRepr(value)), value)).toBe(true);
      }),
    );
  });

  test('strings print as Python repr() prints them: quotes, escapes, unprintable characters', () => {
    const cases: Array<[string, string]> = [
      ['plain', "'plain'"],
      ["it's", `"it's"`],
      ['say "hi"', `'say "hi"'`],
      [`both ' "`, `'both \\' "'`],
      ['tab\tnew\nline\r', "'tab\\tnew\\nline\\r'"],
      ['bell\x07 del\x7f', "'bell\\x07 del\\x7f'"],
      ['nbsp\xa0zw\u200b ls\u2028', "'nbsp\\xa0zw\\u200b ls\\u2028'"],
      ['emoji 😀 é', "'emoji 😀 é'"],
      ['back\\slash', "'back\\\\slash'"],
      ['\u{e0001}tag', "'\\U000e0001tag'"],
    ];
    expect(cases.map(([value]) => [value, pythonStringRepr(value)])).toEqual(cases);
  });

  test('JSON floats holding integers stay floats; everything else reads as JSON.parse reads it', () => {
    const value = parseJsonKeepingFloats('{"a": 99.0, "b": [2E3, -0.0, 1.5, 7], "__proto__": {"c": 1e2}, "s": "1.0"}');
    const record = value as Record<string, unknown>;
    expect(record.a).toBeInstanceOf(PythonFloat);
    expect((record.b as unknown[]).map((item) => item instanceof PythonFloat)).toEqual([true, true, false, false]);
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
    expect(Object.keys(record)).toEqual(['a', 'b', '__proto__', 's']);
    expect(pythonJson(value)).toBe('{"a": 99.0, "b": [2000.0, -0.0, 1.5, 7], "__proto__": {"c": 100.0}, "s": "1.0"}');
    expect(() => parseJsonKeepingFloats('{"a": 1.0')).toThrow(SyntaxError);
    // Integers beyond 2^53 keep every digit, as Python's int does.
    const big = parseJsonKeepingFloats('[12345678901234567890, -98765432109876543210, 9007199254740991]') as unknown[];
    expect(big.map((item) => item instanceof PythonInteger)).toEqual([true, true, false]);
    expect(pythonJson(big)).toBe('[12345678901234567890, -98765432109876543210, 9007199254740991]');
    expect(pythonRepr(big)).toBe('[12345678901234567890, -98765432109876543210, 9007199254740991]');
    fc.assert(
      fc.property(fc.jsonValue(), (json) => {
        const text = JSON.stringify(json);
        expect(JSON.stringify(parseJsonKeepingFloats(text))).toBe(JSON.stringify(JSON.parse(text)));
      }),
    );
  });

  test("strip, lstrip, rstrip and trim remove Python's whitespace or the characters given", () => {
    // Python 3.11's results: U+FEFF is not whitespace to Python (JavaScript's trim removes it), \x1c-\x1f and \x85 are.
    expect(pythonStrip('\ufeff\x1cx\x85 ', undefined, 'both')).toBe('\ufeff\x1cx');
    expect(pythonStrip('\x1c\u3000x\u2028', null, 'both')).toBe('x');
    expect(pythonStrip('\n\n after\n', '\n', 'start')).toBe(' after\n');
    expect(pythonStrip('xy😀ab😀', '😀b', 'end')).toBe('xy😀a');
    expect(pythonStrip('  ', undefined, 'end')).toBe('');
  });
});
