/**
 * How Python prints the values a chat template can print, so a rendering here equals what
 * transformers' apply_chat_template (Python Jinja) renders at serving time: `str()` for `{{ }}`,
 * `|string`, `~` and `join`; `json.dumps` with transformers' defaults for `tojson`. Written by hand
 * because no JavaScript library prints Python's reprs and json.dumps floats; the values are plain
 * JSON values plus what JSON.parse cannot carry (a float that holds an integer, an integer beyond
 * 2^53, a tuple).
 */

/**
 * A number Python holds as a float whatever its value: JSON `99.0` or `1e3`, which JSON.parse
 * turns into the integer 99 (printed `99` where Python prints `99.0`). Non-integer numbers need
 * no wrapper: every JavaScript number with a fraction is a float in Python too.
 */
export class PythonFloat {
  constructor(readonly value: number) {}

  /** JSON.stringify and hashing see the number. */
  toJSON(): number {
    return this.value;
  }
}

/**
 * An integer JSON literal beyond 2^53 (`12345678901234567890`), which a JavaScript number cannot
 * hold: Python keeps every digit, so the literal's text is kept for printing.
 */
export class PythonInteger {
  constructor(readonly text: string) {}

  /** JSON.stringify and hashing see the (rounded) number. */
  toJSON(): number {
    return Number(this.text);
  }
}

/** A tuple (`(a, b)` in a template): a list that prints with parentheses. */
export class PythonTuple extends Array<unknown> {}

const whitespace = /[ \t\n\r]*/y;
const numberLiteral = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y;
const stringLiteral = /"(?:[^"\\]|\\.)*"/y;

/** Reads text JSON.parse has already accepted, keeping `99.0` a PythonFloat. */
class FloatKeepingReader {
  private position = 0;
  constructor(private readonly text: string) {}

  private skipWhitespace(): void {
    whitespace.lastIndex = this.position;
    whitespace.exec(this.text);
    this.position = whitespace.lastIndex;
  }

  private match(pattern: RegExp): RegExpExecArray {
    pattern.lastIndex = this.position;
    const found = pattern.exec(this.text)!;
    this.position = pattern.lastIndex;
    return found;
  }

  value(): unknown {
    this.skipWhitespace();
    const character = this.text[this.position];
    if (character === '{') return this.object();
    if (character === '[') return this.array();
    if (character === '"') return JSON.parse(this.match(stringLiteral)[0]) as string;
    for (const [word, value] of [
      ['true', true],
      ['false', false],
      ['null', null],
    ] as const) {
      if (this.text.startsWith(word, this.position)) {
        this.position += word.length;
        return value;
      }
    }
    const found = this.match(numberLiteral);
    const value = Number(found[0]);
    const float = found[1] !== undefined || found[2] !== undefined;
    if (!float && !Number.isSafeInteger(value)) return new PythonInteger(found[0]);
    return float && Number.isInteger(value) ? new PythonFloat(value) : value;
  }

  private object(): Record<string, unknown> {
    const result: Record<string, unknown> = {};
    this.position++;
    this.skipWhitespace();
    while (this.text[this.position] !== '}') {
      this.skipWhitespace();
      const key = JSON.parse(this.match(stringLiteral)[0]) as string;
      this.skipWhitespace();
      this.position++; // ':'
      // defineProperty: a "__proto__" key is an own field, as JSON.parse makes it.
      Object.defineProperty(result, key, { value: this.value(), enumerable: true, writable: true, configurable: true });
      this.skipWhitespace();
      if (this.text[this.position] === ',') this.position++;
    }
    this.position++;
    return result;
  }

  private array(): unknown[] {
    const result: unknown[] = [];
    this.position++;
    this.skipWhitespace();
    while (this.text[this.position] !== ']') {
      result.push(this.value());
      this.skipWhitespace();
      if (this.text[this.position] === ',') this.position++;
      this.skipWhitespace();
    }
    this.position++;
    return result;
  }
}

/**
 * JSON.parse that keeps float-ness: a number written with a fraction or an exponent whose value
 * is an integer (`99.0`, `2E3`) becomes a PythonFloat, as Python's json.loads makes it a float;
 * an integer beyond 2^53 a PythonInteger (every digit kept); every other value is JSON.parse's.
 * Throws what JSON.parse throws.
 */
export function parseJsonKeepingFloats(text: string): unknown {
  const value = JSON.parse(text) as unknown;
  if (!mayHoldPythonNumbers(text)) return value;
  return new FloatKeepingReader(text).value();
}

/**
 * Whether JSON text may hold a number JSON.parse reads unlike Python's json.loads: a float whose
 * value is an integer (its fraction ends in 0, or it has an exponent) or an integer of 16 digits
 * or more. False says for sure that it holds none; true may be a string that only looks so.
 */
export function mayHoldPythonNumbers(text: string): boolean {
  return /\d\.\d*0(?!\d)|\d[eE][+-]?\d|\d{16}/.test(text);
}

/** Python's repr() of a float: the shortest digits that read back, in Python's layout. */
export function pythonFloatRepr(value: number): string {
  if (Number.isNaN(value)) return 'nan';
  if (value === Infinity) return 'inf';
  if (value === -Infinity) return '-inf';
  if (value === 0) return Object.is(value, -0) ? '-0.0' : '0.0';
  // toExponential() without digits gives the shortest round-trip digits, as Python's repr does.
  const [mantissa, exponentText] = Math.abs(value).toExponential().split('e');
  const exponent = Number(exponentText);
  const digits = mantissa.replace('.', '');
  const sign = value < 0 ? '-' : '';
  if (exponent < -4 || exponent >= 16) {
    const significand = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    const magnitude = String(Math.abs(exponent)).padStart(2, '0');
    return `${sign}${significand}e${exponent < 0 ? '-' : '+'}${magnitude}`;
  }
  if (exponent < 0) return `${sign}0.${'0'.repeat(-exponent - 1)}${digits}`;
  if (digits.length <= exponent + 1) return `${sign}${digits}${'0'.repeat(exponent + 1 - digits.length)}.0`;
  return `${sign}${digits.slice(0, exponent + 1)}.${digits.slice(exponent + 1)}`;
}

/** Python's int printing: every digit, where JavaScript switches to exponent form past 1e21. */
function pythonIntegerText(value: number): string {
  return Number.isSafeInteger(value) ? String(value) : BigInt(value).toString();
}

function numberText(value: number | PythonFloat | PythonInteger): string {
  if (value instanceof PythonInteger) return value.text;
  if (value instanceof PythonFloat) return pythonFloatRepr(value.value);
  return Number.isInteger(value) ? pythonIntegerText(value) : pythonFloatRepr(value);
}

/** Characters Python's str.isprintable() refuses (space excepted), which repr() escapes. */
const unprintable = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]/u;

/** Python's repr() of a str. */
export function pythonStringRepr(text: string): string {
  const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
  let result = quote;
  for (const character of text) {
    if (character === quote || character === '\\') result += `\\${character}`;
    else if (character === '\n') result += '\\n';
    else if (character === '\r') result += '\\r';
    else if (character === '\t') result += '\\t';
    else if (character !== ' ' && unprintable.test(character)) {
      const code = character.codePointAt(0)!;
      if (code < 0x100) result += `\\x${code.toString(16).padStart(2, '0')}`;
      else if (code < 0x10000) result += `\\u${code.toString(16).padStart(4, '0')}`;
      else result += `\\U${code.toString(16).padStart(8, '0')}`;
    } else result += character;
  }
  return result + quote;
}

/** A mapping's entries: plain objects and Maps (the interpreter's), skipping keys set to undefined (absent in Python). */
function entriesOf(value: object): Array<[string, unknown]> | undefined {
  const entries =
    value instanceof Map
      ? [...(value as Map<string, unknown>)]
      : Object.getPrototypeOf(value) === Object.prototype || Object.getPrototypeOf(value) === null
        ? Object.entries(value)
        : undefined;
  return entries?.filter(([, item]) => item !== undefined);
}

/** A value Python cannot print the way asked (a function, a namespace in tojson, ...). */
export class UnprintableValueError extends Error {}

/** Python's repr() of a template value. */
export function pythonRepr(value: unknown): string {
  if (typeof value === 'string') return pythonStringRepr(value);
  if (value === null || value === undefined) return 'None';
  if (typeof value === 'boolean') return value ? 'True' : 'False';
  if (typeof value === 'number' || value instanceof PythonFloat || value instanceof PythonInteger)
    return numberText(value);
  if (value instanceof PythonTuple) {
    const items = value.map(pythonRepr);
    return items.length === 1 ? `(${items[0]},)` : `(${items.join(', ')})`;
  }
  if (Array.isArray(value)) return `[${value.map(pythonRepr).join(', ')}]`;
  if (typeof value === 'object') {
    const entries = entriesOf(value);
    if (entries) return `{${entries.map(([key, item]) => `${pythonStringRepr(key)}: ${pythonRepr(item)}`).join(', ')}}`;
  }
  throw new UnprintableValueError(`cannot print ${typeof value === 'function' ? 'a function' : 'this value'}`);
}

/** Python's str() of a template value: what `{{ value }}`, `|string` and `~` write. Undefined writes nothing. */
export function pythonStr(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value === undefined) return '';
  return pythonRepr(value);
}

export interface PythonJsonOptions {
  indent?: number | null;
  ensureAscii?: boolean;
  separators?: readonly [string, string] | null;
  sortKeys?: boolean;
  /** Write NaN and ±Infinity as `null`, as JSON.stringify does (Python writes `NaN`, which is not JSON). */
  nonFiniteAsNull?: boolean;
}

function jsonString(text: string, ensureAscii: boolean): string {
  const json = JSON.stringify(text);
  return ensureAscii
    ? json.replace(/[\x7f-\uffff]/g, (unit) => `\\u${unit.charCodeAt(0).toString(16).padStart(4, '0')}`)
    : json;
}

/** Python's ordering of str keys: by code point (JavaScript's sort compares UTF-16 units). */
function byCodePoint(left: string, right: string): number {
  const a = Array.from(left, (character) => character.codePointAt(0)!);
  const b = Array.from(right, (character) => character.codePointAt(0)!);
  for (let index = 0; index < Math.min(a.length, b.length); index++)
    if (a[index] !== b[index]) return a[index] - b[index];
  return a.length - b.length;
}

/**
 * Python's json.dumps as transformers' `tojson` filter calls it (ensure_ascii False, no sorting,
 * separators `, ` and `: `, or `,` and `: ` with an indent): floats keep their `.0`, integers
 * every digit, keys their order.
 */
export function pythonJson(value: unknown, options: PythonJsonOptions = {}): string {
  const indent = options.indent ?? null;
  const ensureAscii = options.ensureAscii ?? false;
  const [itemSeparator, keySeparator] = options.separators ?? (indent === null ? [', ', ': '] : [',', ': ']);
  const write = (item: unknown, depth: number): string => {
    if (item === null || item === undefined) return 'null';
    if (typeof item === 'boolean') return item ? 'true' : 'false';
    if (typeof item === 'string') return jsonString(item, ensureAscii);
    if (item instanceof PythonInteger) return item.text;
    if (typeof item === 'number' || item instanceof PythonFloat) {
      const number = item instanceof PythonFloat ? item.value : item;
      if (!Number.isFinite(number) && options.nonFiniteAsNull) return 'null';
      if (Number.isNaN(number)) return 'NaN';
      if (!Number.isFinite(number)) return number > 0 ? 'Infinity' : '-Infinity';
      return numberText(item);
    }
    const open = indent === null ? '' : `\n${' '.repeat(indent * (depth + 1))}`;
    const close = indent === null ? '' : `\n${' '.repeat(indent * depth)}`;
    const separator = indent === null ? itemSeparator : `${itemSeparator}${open}`;
    if (Array.isArray(item)) {
      if (item.length === 0) return '[]';
      return `[${open}${item.map((element) => write(element, depth + 1)).join(separator)}${close}]`;
    }
    if (typeof item === 'object') {
      let entries = entriesOf(item);
      if (entries) {
        if (entries.length === 0) return '{}';
        if (options.sortKeys) entries = [...entries].sort(([a], [b]) => byCodePoint(a, b));
        const written = entries.map(
          ([key, element]) => `${jsonString(key, ensureAscii)}${keySeparator}${write(element, depth + 1)}`,
        );
        return `{${open}${written.join(separator)}${close}}`;
      }
    }
    throw new UnprintableValueError('Object of this type is not JSON serializable');
  };
  return write(value, 0);
}

/** Whether writing a number here and in Python gives different text (JavaScript writes `1e-7` and `0.00001`, Python `1e-07` and `1e-05`). */
function writtenDifferently(value: number): boolean {
  if (Number.isInteger(value)) return !Number.isSafeInteger(value);
  return Number.isFinite(value) && Math.abs(value) < 1e-4;
}

/** Whether a value holds a PythonFloat, a PythonInteger or a number JavaScript writes unlike Python. */
function holdsPythonNumbers(value: unknown): boolean {
  if (typeof value === 'number') return writtenDifferently(value);
  if (value === null || typeof value !== 'object') return false;
  if (value instanceof PythonFloat || value instanceof PythonInteger) return true;
  if (Array.isArray(value)) return value.some(holdsPythonNumbers);
  for (const key in value) if (holdsPythonNumbers((value as Record<string, unknown>)[key])) return true;
  return false;
}

/**
 * JSON.stringify that writes numbers as Python's json.dumps writes them: a PythonFloat with its
 * `.0` (`1.0`, `1e+16`), a PythonInteger with every digit, other floats in Python's layout
 * (`1e-07`); compact (`,` and `:`) or with `indent` as `JSON.stringify(value, null, indent)`
 * lays it out. For plain JSON values whose numbers both languages write alike (every integer
 * below 2^53, every float from 1e-4 up) the text is JSON.stringify's, byte for byte, so records
 * written before keep their bytes. Node 20 has no JSON.rawJSON; hence by hand.
 */
export function stringifyJsonKeepingFloats(value: unknown, indent?: number): string {
  if (!holdsPythonNumbers(value)) return JSON.stringify(value, null, indent);
  return pythonJson(value, {
    nonFiniteAsNull: true,
    ...(indent === undefined ? { separators: [',', ':'] as const } : { indent }),
  });
}

/**
 * JSON.stringify of a record (one JSONL line) whose top-level `fields` are written keeping floats
 * (stringifyJsonKeepingFloats): the reading of parseRecordLine's `keepFloatsIn`, written back.
 * The other fields are JSON.stringify's, so a record without such a float keeps its bytes.
 */
export function stringifyRecordKeepingFloatsIn(record: object, fields: readonly string[]): string {
  const values = record as Record<string, unknown>;
  if (!fields.some((field) => holdsPythonNumbers(values[field]))) return JSON.stringify(record);
  const members: string[] = [];
  for (const key of Object.keys(record)) {
    const text = fields.includes(key) ? stringifyJsonKeepingFloats(values[key]) : JSON.stringify(values[key]);
    // undefined for what JSON.stringify leaves out (undefined, functions).
    if (text !== undefined) members.push(`${JSON.stringify(key)}:${text}`);
  }
  return `{${members.join(',')}}`;
}

/**
 * A copy of a JSON value that keeps PythonFloat and PythonInteger (immutable, so shared):
 * structuredClone, and copies that rebuild every object, would turn them into `{value: 1}`.
 */
export function copyJsonKeepingFloats<T>(value: T): T {
  if (value === null || typeof value !== 'object' || value instanceof PythonFloat || value instanceof PythonInteger)
    return value;
  if (Array.isArray(value)) return value.map(copyJsonKeepingFloats) as T;
  const copy: Record<string, unknown> = {};
  for (const key of Object.keys(value)) {
    const item = copyJsonKeepingFloats((value as Record<string, unknown>)[key]);
    // An own `__proto__` key (JSON.parse makes one) stays a key, as structuredClone keeps it.
    if (key === '__proto__')
      Object.defineProperty(copy, key, { value: item, enumerable: true, writable: true, configurable: true });
    else copy[key] = item;
  }
  return copy as T;
}

/**
 * The value with every PythonFloat and PythonInteger a plain number (JSON.parse's reading), for
 * code that checks numbers with `typeof` (Ajv compiling a schema); the value itself when it holds
 * none.
 */
export function plainJsonOf<T>(value: T): T {
  return holdsPythonNumbers(value) ? (JSON.parse(JSON.stringify(value)) as T) : value;
}

/**
 * The code points Python's str.isspace() accepts, which str.strip() removes by default: JavaScript's
 * trim() removes a different set (it also removes U+FEFF, and keeps U+001C-U+001F and U+0085).
 */
const pythonWhitespace = new Set(
  [
    ...'\t\n\v\f\r\x1c\x1d\x1e\x1f \x85\xa0\u1680',
    ...Array.from({ length: 11 }, (_, index) => String.fromCharCode(0x2000 + index)),
    ...'\u2028\u2029\u202f\u205f\u3000',
  ].map((character) => character.codePointAt(0)!),
);

/**
 * Python's str.strip / lstrip / rstrip (and Jinja's `trim`, which is strip): without `chars` (or
 * with None) Python's whitespace, else every code point of `chars`.
 */
export function pythonStrip(text: string, chars: string | null | undefined, side: 'both' | 'start' | 'end'): string {
  const removed =
    chars === undefined || chars === null
      ? pythonWhitespace
      : new Set([...chars].map((character) => character.codePointAt(0)!));
  const points = [...text];
  let start = 0;
  let end = points.length;
  if (side !== 'end') while (start < end && removed.has(points[start].codePointAt(0)!)) start++;
  if (side !== 'start') while (end > start && removed.has(points[end - 1].codePointAt(0)!)) end--;
  return start === 0 && end === points.length ? text : points.slice(start, end).join('');
}
