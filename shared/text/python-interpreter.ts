import { Environment, Interpreter } from '@huggingface/jinja';
import {
  PythonFloat,
  PythonInteger,
  PythonTuple,
  UnprintableValueError,
  pythonJson,
  pythonStr,
  pythonStrip,
  type PythonJsonOptions,
} from './python-values';

/** A value as templates see it (the library's runtime value). */
export type TemplateValue = ReturnType<Environment['set']>;

type SyntaxNode = { type: string; [field: string]: unknown };

/**
 * Converts a value with the library's own converter without declaring it anywhere: Environment.set
 * is `declareVariable(name, convert(value))`, called here with a receiver whose declareVariable
 * only hands the converted value back (the library does not export its converter).
 */
function libraryValue(value: unknown): TemplateValue {
  const receiver = { declareVariable: (_name: string, converted: TemplateValue) => converted };
  return (Environment.prototype.set as (this: unknown, name: string, value: unknown) => TemplateValue).call(
    receiver,
    'value',
    value,
  );
}

type ValueClass = new (value: unknown) => TemplateValue;
// The library does not export its value classes; converted samples carry their constructors.
const FloatValue = libraryValue(0.5).constructor as ValueClass;
const StringValue = libraryValue('').constructor as ValueClass;
const ArrayValue = libraryValue([]).constructor as ValueClass;
const ObjectValue = libraryValue({}).constructor as ValueClass;

/** The digits of the library's integers made from a PythonInteger (its number is rounded). */
const integerTexts = new WeakMap<object, string>();

/**
 * A template value for a plain value, as the library converts it, except that a PythonFloat
 * becomes the library's float (printed `99.0`), which JSON.parse's numbers cannot say, and a
 * PythonInteger the library's integer printed with all its digits.
 */
export function toTemplateValue(value: unknown): TemplateValue {
  if (value instanceof PythonFloat) return new FloatValue(value.value);
  if (value instanceof PythonInteger) {
    const converted = libraryValue(Number(value.text));
    integerTexts.set(converted, value.text);
    return converted;
  }
  if (Array.isArray(value)) return new ArrayValue(value.map(toTemplateValue));
  if (value !== null && typeof value === 'object') {
    return new ObjectValue(new Map(Object.entries(value).map(([key, item]) => [key, toTemplateValue(item)])));
  }
  return libraryValue(value);
}

/** The plain value of a template value, for python-values' printers (Maps for mappings, to keep their keys' order). */
function plainValue(value: TemplateValue): unknown {
  switch (value.type) {
    case 'FloatValue':
      return Number.isInteger(value.value) ? new PythonFloat(value.value as number) : value.value;
    case 'IntegerValue': {
      const text = integerTexts.get(value);
      return text === undefined ? value.value : new PythonInteger(text);
    }
    case 'StringValue':
    case 'BooleanValue':
      return value.value;
    case 'NullValue':
      return null;
    case 'UndefinedValue':
      return undefined;
    case 'ArrayValue':
      return (value.value as TemplateValue[]).map(plainValue);
    case 'TupleValue':
      return PythonTuple.from((value.value as TemplateValue[]).map(plainValue));
    case 'ObjectValue':
    case 'KeywordArgumentsValue':
      return new Map([...(value.value as Map<string, TemplateValue>)].map(([key, item]) => [key, plainValue(item)]));
    default:
      throw new UnprintableValueError(`cannot print a ${value.type}`);
  }
}

/** Statements whose value is their output already (or nothing), as opposed to expressions printed by `{{ }}`. */
const statementTypes = new Set([
  'Set',
  'If',
  'For',
  'Macro',
  'CallStatement',
  'FilterStatement',
  'Comment',
  'Program',
  'Break',
  'Continue',
]);

/** The library's methods PythonInterpreter replaces (private in its typings). */
interface Replaced {
  evaluate(node: SyntaxNode, environment: Environment): TemplateValue;
  evaluateBlock(statements: SyntaxNode[], environment: Environment): TemplateValue;
  evaluateBinaryExpression(node: SyntaxNode, environment: Environment): TemplateValue;
  evaluateArguments(args: SyntaxNode[], environment: Environment): [TemplateValue[], Map<string, TemplateValue>];
  applyFilter(operand: TemplateValue, filter: SyntaxNode, environment: Environment): TemplateValue;
}

const library = Interpreter.prototype as unknown as Replaced;

/** A printer's text, or undefined when Python would print something the printers do not model (the library's text is used then). */
function printed(print: () => string): TemplateValue | undefined {
  try {
    return new StringValue(print());
  } catch (error) {
    if (error instanceof UnprintableValueError) return undefined;
    throw error;
  }
}

/**
 * Texts of lists and mappings printed with the default options, by value identity: a
 * conversation's tools and messages are converted once (ChatTemplate caches them) and printed on
 * every render. Lists and mappings are never changed after they are made (only namespaces are
 * assignable, and they are not printed here).
 */
const printedTexts = { str: new WeakMap<object, string>(), json: new WeakMap<object, string>() };

function printedOnce(kind: keyof typeof printedTexts, value: TemplateValue, print: () => string): string {
  if (value.type !== 'ObjectValue' && value.type !== 'ArrayValue') return print();
  let text = printedTexts[kind].get(value);
  if (text === undefined) printedTexts[kind].set(value, (text = print()));
  return text;
}

/** `tojson(...)`'s keyword arguments as json.dumps takes them. */
function jsonOptions(keywords: Map<string, TemplateValue>): PythonJsonOptions {
  const option = (name: string, type: string) => {
    const value = keywords.get(name);
    if (value === undefined || value.type === 'NullValue') return undefined;
    if (value.type !== type) throw new Error(`tojson ${name} must be a ${type.replace('Value', '').toLowerCase()}`);
    return value.value as unknown;
  };
  const separators = keywords.get('separators');
  let pair: [string, string] | null = null;
  if (separators && separators.type !== 'NullValue') {
    const items = plainValue(separators);
    if (!Array.isArray(items) || items.length !== 2 || !items.every((item) => typeof item === 'string'))
      throw new Error('tojson separators must be a pair of strings');
    pair = [items[0], items[1]];
  }
  return {
    indent: (option('indent', 'IntegerValue') as number | undefined) ?? null,
    ensureAscii: (option('ensure_ascii', 'BooleanValue') as boolean | undefined) ?? false,
    sortKeys: (option('sort_keys', 'BooleanValue') as boolean | undefined) ?? false,
    separators: pair,
  };
}

/** A node standing for a value already evaluated (PythonInterpreter.evaluate hands it back). */
const evaluatedType = 'HatEvaluatedValue';

function evaluatedNode(value: TemplateValue): SyntaxNode {
  return { type: evaluatedType, value };
}

function pythonTypeName(value: TemplateValue): string {
  const names: Record<string, string> = {
    IntegerValue: 'int',
    FloatValue: 'float',
    BooleanValue: 'bool',
    ArrayValue: 'list',
    TupleValue: 'tuple',
    ObjectValue: 'dict',
  };
  return names[value.type] ?? value.type;
}

const replacements: Omit<Replaced, 'evaluate' | 'evaluateArguments'> & ThisType<Replaced> = {
  /** `{{ value }}` writes Python's str(value): `True`, `None`, `99.0`, `{'a': 1}`. */
  evaluateBlock(statements, environment) {
    let result = '';
    for (const statement of statements) {
      const value = this.evaluate(statement, environment);
      if (statementTypes.has(statement.type)) {
        if (value.type !== 'NullValue' && value.type !== 'UndefinedValue') result += value.toString();
        continue;
      }
      const text = printed(() => printedOnce('str', value, () => pythonStr(plainValue(value))));
      result += text ? (text.value as string) : value.type === 'NullValue' ? '' : value.toString();
    }
    return new StringValue(result);
  },

  /** `a ~ b` joins Python's str() of both sides (None as `None`, undefined as nothing); `str + non-str` is Python's TypeError. */
  evaluateBinaryExpression(node, environment) {
    const operator = (node.operator as SyntaxNode).value;
    if (operator !== '~' && operator !== '+') return library.evaluateBinaryExpression.call(this, node, environment);
    const left = this.evaluate(node.left as SyntaxNode, environment);
    const right = this.evaluate(node.right as SyntaxNode, environment);
    const defined = left.type !== 'UndefinedValue' && right.type !== 'UndefinedValue';
    if (operator === '~') {
      const text = printed(() => pythonStr(plainValue(left)) + pythonStr(plainValue(right)));
      if (text) return text;
    }
    if (operator === '+' && defined && (left.type === 'StringValue') !== (right.type === 'StringValue')) {
      const other = left.type === 'StringValue' ? right : left;
      if (other.type !== 'NullValue')
        throw new Error(`can only concatenate str (not "${pythonTypeName(other)}") to str`);
    }
    // The library computes the rest from the operands already evaluated (evaluating twice would
    // be exponential in a chain of `+`).
    return library.evaluateBinaryExpression.call(
      this,
      { ...node, left: evaluatedNode(left), right: evaluatedNode(right) },
      environment,
    );
  },

  /** `|string`, `|join` and `|tojson` print as Python does; other filters are the library's. */
  applyFilter(operand, filter, environment) {
    const name = filter.type === 'Identifier' ? filter.value : ((filter.callee as SyntaxNode | undefined)?.value ?? '');
    const called = filter.type === 'CallExpression';
    if (name === 'trim' && operand.type === 'StringValue') {
      // Jinja's trim is str.strip: Python's whitespace, or the characters given.
      const chars = called ? this.evaluateArguments(filter.args as SyntaxNode[], environment)[0][0] : undefined;
      if (chars === undefined || chars.type === 'NullValue' || chars.type === 'StringValue')
        return new StringValue(pythonStrip(operand.value as string, chars?.value as string | null | undefined, 'both'));
    }
    if (name === 'string' && !called) {
      const text = printed(() => printedOnce('str', operand, () => pythonStr(plainValue(operand))));
      if (text) return text;
    } else if (name === 'tojson') {
      const keywords = called ? this.evaluateArguments(filter.args as SyntaxNode[], environment)[1] : undefined;
      const print = () => pythonJson(plainValue(operand), keywords ? jsonOptions(keywords) : {});
      const text = printed(() => (keywords?.size ? print() : printedOnce('json', operand, print)));
      if (text) return text;
    } else if (name === 'join' && operand.type === 'ArrayValue') {
      const [args, keywords] = called
        ? this.evaluateArguments(filter.args as SyntaxNode[], environment)
        : [[], new Map<string, TemplateValue>()];
      const separator = args[0] ?? keywords.get('d') ?? keywords.get('separator');
      if (separator === undefined || separator.type === 'StringValue') {
        const items = plainValue(operand) as unknown[];
        const text = printed(() => items.map(pythonStr).join((separator?.value as string | undefined) ?? ''));
        if (text) return text;
      }
    }
    return library.applyFilter.call(this, operand, filter, environment);
  },
};

const stripSides: Partial<Record<string, 'both' | 'start' | 'end'>> = { strip: 'both', lstrip: 'start', rstrip: 'end' };

/** The library's Interpreter as its typings should say (they do not resolve under nodenext). */
type LibraryInterpreter = new (environment?: Environment) => {
  run(program: unknown): TemplateValue;
  evaluate(statement: unknown, environment: Environment): TemplateValue;
};

/**
 * @huggingface/jinja's interpreter printing values as Python Jinja (transformers'
 * apply_chat_template) does, where the library prints JavaScript's: `True`/`False`/`None` for
 * `{{ }}`, `|string`, `~` and `join`; floats that hold integers keep `.0` (the library converts
 * every JavaScript integer to an int, so PythonFloat carries float-ness in); `tojson` is
 * json.dumps (floats, every digit of large integers, code-point key sorting, `indent=0`). The
 * library keeps everything else: its syntax, tests, other filters and errors.
 */
export class PythonInterpreter extends (Interpreter as unknown as LibraryInterpreter) {
  override evaluate(statement: unknown, environment: Environment): TemplateValue {
    const node = statement as SyntaxNode | undefined;
    if (node?.type === evaluatedType) return node.value as TemplateValue;
    if (node?.type === 'MemberExpression' && !node.computed) {
      const side = stripSides[(node.property as SyntaxNode).value as string];
      if (side) {
        // `text.strip(chars)` as Python's str methods: the library's ignore `chars` and trim JavaScript's whitespace.
        const object = this.evaluate(node.object, environment);
        if (object.type === 'StringValue') {
          const text = object.value as string;
          return libraryValue((chars?: unknown) => {
            if (chars !== undefined && chars !== null && typeof chars !== 'string')
              throw new Error(`${(node.property as SyntaxNode).value as string} arg must be None or str`);
            return pythonStrip(text, chars, side);
          });
        }
        return super.evaluate({ ...node, object: evaluatedNode(object) }, environment);
      }
    }
    return super.evaluate(statement, environment);
  }
}

for (const name of ['evaluateBlock', 'evaluateBinaryExpression', 'applyFilter'] as const) {
  Object.defineProperty(PythonInterpreter.prototype, name, {
    value: replacements[name],
    writable: true,
    configurable: true,
  });
}
