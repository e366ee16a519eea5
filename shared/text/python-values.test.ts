import fc from 'fast-check';
import { canonicalJson, hashValue } from '../hash/hash';
import {
  PythonFloat,
  PythonInteger,
  copyJsonKeepingFloats,
  parseJsonKeepingFloats,
  plainJsonOf,
  pythonFloatRepr,
  pythonJson,
  pythonRepr,
  pythonStringRepr,
  pythonStrip,
  stringifyJsonKeepingFloats,
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

  test('JSON written keeping floats is what Python json.dumps writes, and JSON.stringify where no float is involved', () => {
    // Python 3.11: json.dumps(json.loads(text), separators=(',', ':'), ensure_ascii=False), and indent=2.
    const text = '{"minimum":1.0,"b":[2.50,1e16,1E3,-0.0,1e-7,0.00001,12345678901234567890,7],"s":"1.0 é\\u2028"}';
    const value = parseJsonKeepingFloats(text);
    expect(stringifyJsonKeepingFloats(value)).toBe(
      '{"minimum":1.0,"b":[2.5,1e+16,1000.0,-0.0,1e-07,1e-05,12345678901234567890,7],"s":"1.0 é\u2028"}',
    );
    expect(stringifyJsonKeepingFloats({ a: [new PythonFloat(2)], b: {} }, 2)).toBe(
      '{\n  "a": [\n    2.0\n  ],\n  "b": {}\n}',
    );
    // NaN as JSON.stringify writes it (Python's NaN is not JSON).
    expect(stringifyJsonKeepingFloats([new PythonFloat(1), NaN, undefined, { left: undefined }])).toBe(
      '[1.0,null,null,{}]',
    );
    // Read back keeping floats, the text is written again byte for byte.
    const written = stringifyJsonKeepingFloats(value);
    expect(stringifyJsonKeepingFloats(parseJsonKeepingFloats(written))).toBe(written);
    fc.assert(
      fc.property(fc.jsonValue(), fc.constantFrom(undefined, 2), (json, indent) => {
        const plain = JSON.parse(JSON.stringify(json)) as unknown;
        const numbers = JSON.stringify(plain).match(/-?\d[\d.eE+-]*/g) ?? [];
        // Floats below 1e-4 and integers beyond 2^53 are the numbers Python writes otherwise.
        if (numbers.some((number) => Math.abs(Number(number)) < 1e-4 && Number(number) !== 0)) return;
        if (numbers.some((number) => Number.isInteger(Number(number)) && !Number.isSafeInteger(Number(number)))) return;
        expect(stringifyJsonKeepingFloats(plain, indent)).toBe(JSON.stringify(plain, null, indent));
      }),
    );
  });

  test('floats kept as Python holds them hash, copy and validate as their numbers', () => {
    const kept = parseJsonKeepingFloats('{"minimum":1.0,"big":12345678901234567890,"at":[2E3]}');
    const plain = JSON.parse('{"minimum":1.0,"big":12345678901234567890,"at":[2E3]}') as unknown;
    expect(canonicalJson(kept)).toBe(canonicalJson(plain));
    expect(hashValue(kept)).toBe(hashValue(plain));
    const copy = copyJsonKeepingFloats(kept) as Record<string, unknown>;
    expect(copy).not.toBe(kept);
    expect(copy.minimum).toBeInstanceOf(PythonFloat);
    expect(stringifyJsonKeepingFloats(copy)).toBe('{"minimum":1.0,"big":12345678901234567890,"at":[2000.0]}');
    expect(plainJsonOf(kept)).toEqual(plain);
    const untouched = { a: 1 };
    expect(plainJsonOf(untouched)).toBe(untouched);
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
