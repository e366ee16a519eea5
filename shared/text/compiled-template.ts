/**
 * Chat templates compiled to JavaScript closures over plain values, for the renders that span
 * location repeats per conversation (the full text, the marked text, one served prompt per
 * assistant turn). Written by hand because @huggingface/jinja interprets its syntax tree and
 * wraps every value it touches (each message field, each literal, each `loop` variable, each
 * boolean) in a runtime-value object, which was most of a shard part's render time; there is no
 * compiling Jinja engine for JavaScript with the library's semantics.
 *
 * The semantics are the library's (version pinned in package.json) with values printed as Python
 * prints them (python-interpreter.ts, python-values.ts), not Python Jinja's in everything: `==` compares raw values loosely, a set inside a loop body is visible to
 * later iterations. Only
 * what is modelled exactly compiles: a template using anything else (macros, floats, division,
 * loop controls, other filters) is not compiled at all, and at render time any value or operation
 * outside the model (an operation on null, a float in arithmetic, output of a list) throws
 * `NotCompiled`, after which ChatTemplate renders with the interpreter, so errors and rare cases
 * come from the library itself. ChatTemplate also compares the two engines on the first renders
 * of each template and on a sample after that (chat-template.ts).
 */

import {
  PythonFloat,
  PythonInteger,
  PythonTuple,
  UnprintableValueError,
  pythonJson,
  pythonStr,
  pythonStrip,
} from './python-values';

/** Compiled code met a value or operation it does not model; render with the interpreter instead. */
export class NotCompiled extends Error {
  constructor(what: string) {
    super(`not compiled: ${what}`);
  }
}

type SyntaxNode = { type: string; [field: string]: unknown };

/** A namespace() object: its attributes can be assigned. */
class Namespace {
  constructor(readonly entries: Map<string, unknown>) {}
}

/** A tuple literal (the library's TupleValue). */
const Tuple = PythonTuple;

/** A method read off a value and not yet called (`message.content.startswith`). */
class BoundMethod {
  constructor(
    readonly receiver: unknown,
    readonly name: string,
  ) {}
}

const namespaceFunction = Symbol('namespace');

class Scope {
  private readonly variables = new Map<string, unknown>();
  constructor(private readonly parent?: Scope) {}

  get(name: string): unknown {
    if (this.variables.has(name)) return this.variables.get(name);
    return this.parent?.get(name);
  }

  set(name: string, value: unknown): void {
    this.variables.set(name, value);
  }
}

type Expression = (scope: Scope) => unknown;
/** A statement appends its output to `out.text`. */
type Statement = (scope: Scope, out: { text: string }) => void;

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const prototype = Object.getPrototypeOf(value) as unknown;
  return prototype === Object.prototype || prototype === null;
}

const hasOwn = (object: object, key: string) => Object.prototype.hasOwnProperty.call(object, key);

function isPrimitive(value: unknown): value is string | number | boolean {
  return typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean';
}

/** The library's __bool__. */
function truthy(value: unknown): boolean {
  if (value instanceof PythonFloat) return value.value !== 0;
  if (value instanceof PythonInteger) return true;
  if (Array.isArray(value)) return value.length > 0;
  if (isPlainObject(value)) return Object.keys(value).length > 0;
  return !!value;
}

/** Python's str() of a value (what `{{ }}`, `|string` and `~` write); namespaces and functions are not compiled. */
function output(value: unknown): string {
  if (typeof value === 'string') return value;
  try {
    return pythonStr(value);
  } catch (error) {
    if (error instanceof UnprintableValueError) throw new NotCompiled('output of a namespace or function');
    throw error;
  }
}

/** `tojson` as json.dumps; namespaces and functions are not compiled. */
function json(value: unknown, options: Parameters<typeof pythonJson>[1]): string {
  try {
    return pythonJson(value, options);
  } catch (error) {
    if (error instanceof UnprintableValueError) throw new NotCompiled('tojson of a namespace or function');
    throw error;
  }
}

function integer(value: unknown, what: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value)) throw new NotCompiled(what);
  return value;
}

/**
 * `tojson` of lists and mappings with the default options, by identity: a conversation's tool
 * definitions and tool-call arguments are written once per message object, not once per render.
 * Rendered values are never changed afterwards (ChatTemplate.render's contract); namespaces, the
 * only values templates can change, are never written (not compiled).
 */
const defaultJsonTexts = new WeakMap<object, string>();

function defaultJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return json(value, {});
  let text = defaultJsonTexts.get(value);
  if (text === undefined) defaultJsonTexts.set(value, (text = json(value, {})));
  return text;
}

/** The library's slice helper (Python semantics). */
function slice<T>(items: T[], start: number | undefined, stop: number | undefined, step = 1): T[] {
  const direction = Math.sign(step);
  const length = items.length;
  let from: number;
  let to: number;
  if (direction >= 0) {
    from = (start ?? 0) < 0 ? Math.max(length + (start ?? 0), 0) : Math.min(start ?? 0, length);
    to = (stop ?? length) < 0 ? Math.max(length + (stop ?? length), 0) : Math.min(stop ?? length, length);
  } else {
    from =
      (start ?? length - 1) < 0
        ? Math.max(length + (start ?? length - 1), -1)
        : Math.min(start ?? length - 1, length - 1);
    to = (stop ?? -1) < -1 ? Math.max(length + (stop ?? -1), -1) : Math.min(stop ?? -1, length - 1);
  }
  const result: T[] = [];
  for (let index = from; direction * index < direction * to; index += step) result.push(items[index]);
  return result;
}

const stringMethods = new Set([
  'upper',
  'lower',
  'strip',
  'title',
  'capitalize',
  'rstrip',
  'lstrip',
  'startswith',
  'endswith',
  'split',
  'replace',
]);
const objectMethods = new Set(['get', 'items', 'keys', 'values', 'dictsort']);

/** `object.property` as the library reads it. */
function member(object: unknown, property: unknown): unknown {
  if (isPlainObject(object) || object instanceof Namespace) {
    if (typeof property !== 'string') throw new NotCompiled('a mapping indexed by a non-string');
    if (object instanceof Namespace) return object.entries.get(property);
    if (hasOwn(object, property)) return object[property];
    return objectMethods.has(property) ? new BoundMethod(object, property) : undefined;
  }
  if (Array.isArray(object) || typeof object === 'string') {
    if (typeof property === 'number') {
      if (!Number.isInteger(property)) throw new NotCompiled('a float index');
      return object.at(property);
    }
    if (typeof property === 'string') {
      if (property === 'length') return object.length;
      return typeof object === 'string' && stringMethods.has(property) ? new BoundMethod(object, property) : undefined;
    }
    throw new NotCompiled('an index that is neither a number nor a string');
  }
  if (typeof property !== 'string') throw new NotCompiled('a property that is not a string');
  // Numbers, booleans, null, undefined and functions have no attributes the library knows.
  return undefined;
}

function titleCase(text: string): string {
  return text.replace(/\b\w/g, (character) => character.toUpperCase());
}

function startsOrEnds(receiver: string, pattern: unknown, test: (prefix: string) => boolean): boolean {
  if (typeof pattern === 'string') return test(pattern);
  if (Array.isArray(pattern)) {
    for (const item of pattern) {
      if (typeof item !== 'string') throw new NotCompiled('startswith/endswith with a non-string item');
      if (test(item)) return true;
    }
    return false;
  }
  throw new NotCompiled('startswith/endswith with a non-string pattern');
}

function split(receiver: string, separator: unknown, maxSplit: unknown): string[] {
  const limit = maxSplit === undefined ? -1 : integer(maxSplit, 'split with a non-integer maxsplit');
  if (separator === undefined || separator === null) {
    const text = receiver.trimStart();
    const result: string[] = [];
    for (const match of text.matchAll(/\S+/g)) {
      if (limit !== -1 && result.length >= limit) {
        result.push(match[0] + text.slice(match.index + match[0].length));
        break;
      }
      result.push(match[0]);
    }
    return result;
  }
  if (typeof separator !== 'string' || separator === '') throw new NotCompiled('split with an unusual separator');
  const result = receiver.split(separator);
  if (limit !== -1 && result.length > limit) result.push(result.splice(limit).join(separator));
  return result;
}

const loneSurrogate = /[\ud800-\udfff]/;

function replace(receiver: string, old: unknown, replacement: unknown, count: unknown): string {
  if (typeof old !== 'string' || typeof replacement !== 'string') throw new NotCompiled('replace with non-strings');
  if (old === '' || loneSurrogate.test(old)) throw new NotCompiled('replace of an empty or half character');
  if (count === 0) return receiver;
  let remaining = count === undefined || count === null ? Infinity : integer(count, 'replace with a float count');
  if (remaining < 0) remaining = Infinity;
  if (remaining === Infinity) return receiver.split(old).join(replacement);
  let result = '';
  let position = 0;
  while (remaining > 0) {
    const found = receiver.indexOf(old, position);
    if (found < 0) break;
    result += receiver.slice(position, found) + replacement;
    position = found + old.length;
    remaining--;
  }
  return result + receiver.slice(position);
}

function callMethod(method: BoundMethod, args: unknown[]): unknown {
  const { receiver, name } = method;
  if (typeof receiver === 'string') {
    switch (name) {
      case 'upper':
        return receiver.toUpperCase();
      case 'lower':
        return receiver.toLowerCase();
      case 'strip':
      case 'lstrip':
      case 'rstrip': {
        const chars = args[0];
        if (chars !== undefined && chars !== null && typeof chars !== 'string')
          throw new NotCompiled(`${name} with a non-string argument`);
        return pythonStrip(receiver, chars, name === 'strip' ? 'both' : name === 'lstrip' ? 'start' : 'end');
      }
      case 'title':
        return titleCase(receiver);
      case 'capitalize':
        return receiver.charAt(0).toUpperCase() + receiver.slice(1);
      case 'startswith':
        if (args.length === 0) throw new NotCompiled('startswith without arguments');
        return startsOrEnds(receiver, args[0], (prefix) => receiver.startsWith(prefix));
      case 'endswith':
        if (args.length === 0) throw new NotCompiled('endswith without arguments');
        return startsOrEnds(receiver, args[0], (suffix) => receiver.endsWith(suffix));
      case 'split':
        return split(receiver, args[0], args[1]);
      case 'replace':
        if (args.length < 2) throw new NotCompiled('replace with too few arguments');
        return replace(receiver, args[0], args[1], args[2]);
    }
  } else if (isPlainObject(receiver)) {
    switch (name) {
      case 'get': {
        if (typeof args[0] !== 'string') throw new NotCompiled('get with a non-string key');
        if (hasOwn(receiver, args[0])) return receiver[args[0]];
        return args.length > 1 ? args[1] : null;
      }
      case 'items':
        return Object.entries(receiver).map(([key, value]) => [key, value]);
      case 'keys':
        return Object.keys(receiver);
      case 'values':
        return Object.values(receiver);
    }
  }
  throw new NotCompiled(`method ${name}`);
}

/**
 * A filter as the library's applyFilter applies it: `called` for the call form (`x|join(', ')`),
 * which the library handles apart from the plain form (`x|join`).
 */
function applyFilter(
  name: string,
  called: boolean,
  operand: unknown,
  args: unknown[],
  keywords: Map<string, unknown>,
): unknown {
  if (!called) {
    if (name === 'safe') return operand;
    if (name === 'tojson') return defaultJson(operand);
    return plainFilter(name, operand);
  }
  switch (name) {
    case 'tojson': {
      if (args.length > 0) throw new NotCompiled('tojson with positional arguments');
      for (const key of keywords.keys())
        if (!['indent', 'ensure_ascii', 'sort_keys', 'separators'].includes(key))
          throw new NotCompiled(`tojson ${key}`);
      const indent = keywords.get('indent') ?? null;
      const ensureAscii = keywords.get('ensure_ascii') ?? false;
      const sortKeys = keywords.get('sort_keys') ?? false;
      const separators = keywords.get('separators') ?? null;
      if (!(indent === null || (typeof indent === 'number' && Number.isInteger(indent))))
        throw new NotCompiled('tojson indent');
      if (typeof ensureAscii !== 'boolean' || typeof sortKeys !== 'boolean') throw new NotCompiled('tojson options');
      let pair: [string, string] | null = null;
      if (separators !== null) {
        if (
          !Array.isArray(separators) ||
          separators.length !== 2 ||
          !separators.every((item) => typeof item === 'string')
        )
          throw new NotCompiled('tojson separators');
        pair = [separators[0], separators[1]];
      }
      return json(operand, { indent, ensureAscii, sortKeys, separators: pair });
    }
    case 'join': {
      if (keywords.size > 0 || args.length > 1) throw new NotCompiled('join arguments');
      const separator = args.length > 0 ? args[0] : '';
      if (typeof separator !== 'string') throw new NotCompiled('join with a non-string separator');
      if (typeof operand === 'string') return Array.from(operand).join(separator);
      if (Array.isArray(operand)) return joinItems(operand, separator);
      throw new NotCompiled('join of a non-sequence');
    }
    case 'default': {
      if (keywords.size > 0) throw new NotCompiled('default with keyword arguments');
      const fallback = args.length > 0 ? args[0] : '';
      const boolean = args.length > 1 ? args[1] : false;
      if (typeof boolean !== 'boolean') throw new NotCompiled('default with a non-boolean flag');
      return operand === undefined || (boolean && !truthy(operand)) ? fallback : operand;
    }
  }
  throw new NotCompiled(`filter ${name}(...)`);
}

/** The plain form of the filters compiled (the library's applyFilter on an Identifier). */
function plainFilter(name: string, operand: unknown): unknown {
  if (name === 'string') return output(operand);
  if (Array.isArray(operand)) {
    switch (name) {
      case 'list':
        return operand;
      case 'first':
      case 'last':
        if (operand.length === 0) throw new NotCompiled(`${name} of an empty list`);
        return name === 'first' ? operand[0] : operand[operand.length - 1];
      case 'length':
        return operand.length;
      case 'reverse':
        return operand.slice().reverse();
      case 'join':
        return joinItems(operand, '');
    }
  } else if (typeof operand === 'string') {
    switch (name) {
      case 'length':
        return operand.length;
      case 'upper':
      case 'lower':
      case 'title':
      case 'capitalize':
        return callMethod(new BoundMethod(operand, name), []);
      case 'trim':
        return pythonStrip(operand, undefined, 'both');
      case 'join':
        return operand;
    }
  } else if (isPlainObject(operand)) {
    switch (name) {
      case 'items':
        return Object.entries(operand).map(([key, value]) => [key, value]);
      case 'length':
        return Object.keys(operand).length;
      case 'keys':
        return Object.keys(operand);
      case 'values':
        return Object.values(operand);
    }
  }
  throw new NotCompiled(`filter ${name}`);
}

/** Python's `separator.join(str(item) for item in items)`. */
function joinItems(items: unknown[], separator: string): string {
  return items.map(output).join(separator);
}

const tests: Record<string, (value: unknown) => boolean> = {
  boolean: (value) => typeof value === 'boolean',
  false: (value) => value === false,
  true: (value) => value === true,
  none: (value) => value === null,
  string: (value) => typeof value === 'string',
  number: (value) => typeof value === 'number' || value instanceof PythonFloat || value instanceof PythonInteger,
  integer: (value) => (typeof value === 'number' && Number.isInteger(value)) || value instanceof PythonInteger,
  iterable: (value) => Array.isArray(value) || typeof value === 'string',
  mapping: (value) => isPlainObject(value),
  sequence: (value) => Array.isArray(value) || isPlainObject(value) || typeof value === 'string',
  lower: (value) => typeof value === 'string' && value === value.toLowerCase(),
  upper: (value) => typeof value === 'string' && value === value.toUpperCase(),
  defined: (value) => value !== undefined,
  undefined: (value) => value === undefined,
  odd: (value) => integer(value, 'odd of a non-integer') % 2 !== 0,
  even: (value) => integer(value, 'even of a non-integer') % 2 === 0,
};

/** The library's binary operators, in its order of checks. */
function binary(operator: string, left: unknown, right: unknown): unknown {
  if (operator === '==' || operator === '!=') {
    const plain = (value: unknown) => value === null || value === undefined || isPrimitive(value);
    if (!plain(left) || !plain(right)) throw new NotCompiled('comparing lists, mappings or functions');
    // eslint-disable-next-line eqeqeq -- the library compares raw values with ==
    return operator === '==' ? left == right : left != right;
  }
  // Python's `~` writes str() of both sides, None as `None` and undefined as nothing.
  if (operator === '~') return output(left) + output(right);
  if (left === undefined || right === undefined) {
    if (right === undefined && (operator === 'in' || operator === 'not in')) return operator === 'not in';
    throw new NotCompiled('an operation on undefined');
  }
  if (left === null || right === null) throw new NotCompiled('an operation on null');
  if (typeof left === 'number' && typeof right === 'number') {
    switch (operator) {
      case '+':
      case '-':
      case '*': {
        if (!Number.isInteger(left) || !Number.isInteger(right)) throw new NotCompiled('float arithmetic');
        return operator === '+' ? left + right : operator === '-' ? left - right : left * right;
      }
      case '<':
        return left < right;
      case '>':
        return left > right;
      case '>=':
        return left >= right;
      case '<=':
        return left <= right;
    }
    throw new NotCompiled(`operator ${operator} on numbers`);
  }
  if (Array.isArray(left) && Array.isArray(right)) {
    if (operator === '+') return [...left, ...right];
    throw new NotCompiled(`operator ${operator} on lists`);
  }
  if (Array.isArray(right) && (operator === 'in' || operator === 'not in')) {
    const found = right.some((item) => item === left);
    return operator === 'in' ? found : !found;
  }
  // str + str; str + anything else is Python's TypeError, which the interpreter raises.
  if (typeof left === 'string' && typeof right === 'string' && operator === '+') return left + right;
  if (typeof left === 'string' && typeof right === 'string' && (operator === 'in' || operator === 'not in'))
    return operator === 'in' ? right.includes(left) : !right.includes(left);
  if (typeof left === 'string' && isPlainObject(right) && (operator === 'in' || operator === 'not in'))
    return operator === 'in' ? hasOwn(right, left) : !hasOwn(right, left);
  throw new NotCompiled(`operator ${operator}`);
}

class Compiler {
  block(nodes: unknown): Statement {
    const statements = ((nodes as SyntaxNode[] | undefined) ?? []).map((node) => this.statement(node));
    return (scope, out) => {
      for (const statement of statements) statement(scope, out);
    };
  }

  statement(node: SyntaxNode): Statement {
    switch (node.type) {
      case 'Comment':
        return () => undefined;
      case 'If': {
        const test = this.expression(node.test as SyntaxNode);
        const body = this.block(node.body);
        const alternate = this.block(node.alternate);
        return (scope, out) => (truthy(test(scope)) ? body(scope, out) : alternate(scope, out));
      }
      case 'For':
        return this.forStatement(node);
      case 'Set':
        return this.setStatement(node);
      case 'Macro':
      case 'CallStatement':
      case 'FilterStatement':
      case 'Break':
      case 'Continue':
        throw new NotCompiled(node.type);
      default: {
        const expression = this.expression(node);
        return (scope, out) => {
          out.text += output(expression(scope));
        };
      }
    }
  }

  private forStatement(node: SyntaxNode): Statement {
    let iterableNode = node.iterable as SyntaxNode;
    let filter: Expression | undefined;
    if (iterableNode.type === 'SelectExpression') {
      filter = this.expression(iterableNode.test as SyntaxNode);
      iterableNode = iterableNode.lhs as SyntaxNode;
    }
    const iterable = this.expression(iterableNode);
    const loopVariable = node.loopvar as SyntaxNode;
    let bind: (scope: Scope, item: unknown) => void;
    if (loopVariable.type === 'Identifier') {
      const name = loopVariable.value as string;
      if (name === 'namespace') throw new NotCompiled('a loop variable named namespace');
      bind = (scope, item) => scope.set(name, item);
    } else if (loopVariable.type === 'TupleLiteral') {
      const names = (loopVariable.value as SyntaxNode[]).map((element) => {
        if (element.type !== 'Identifier' || element.value === 'namespace')
          throw new NotCompiled('a loop variable that is not a plain name');
        return element.value as string;
      });
      bind = (scope, item) => {
        if (!Array.isArray(item) || item.length !== names.length) throw new NotCompiled('unpacking in a loop');
        for (const [index, name] of names.entries()) scope.set(name, item[index]);
      };
    } else throw new NotCompiled('a loop variable');
    const body = this.block(node.body);
    const otherwise = this.block(node.defaultBlock);
    return (outer, out) => {
      const scope = new Scope(outer);
      let values = iterable(scope);
      if (isPlainObject(values)) values = Object.keys(values);
      if (!Array.isArray(values)) throw new NotCompiled('a loop over something that is not a list or mapping');
      let items = values;
      if (filter) {
        items = values.filter((item) => {
          const test = new Scope(scope);
          bind(test, item);
          return truthy(filter(test));
        });
      }
      const length = items.length;
      for (let index = 0; index < length; index++) {
        scope.set('loop', {
          index: index + 1,
          index0: index,
          revindex: length - index,
          revindex0: length - index - 1,
          first: index === 0,
          last: index === length - 1,
          length,
          previtem: index > 0 ? items[index - 1] : undefined,
          nextitem: index < length - 1 ? items[index + 1] : undefined,
        });
        bind(scope, items[index]);
        body(scope, out);
      }
      if (length === 0) otherwise(scope, out);
    };
  }

  private setStatement(node: SyntaxNode): Statement {
    const value = node.value ? this.expression(node.value as SyntaxNode) : undefined;
    const body = node.value ? undefined : this.block(node.body);
    const compute = (scope: Scope) => {
      if (value) return value(scope);
      const captured = { text: '' };
      body!(scope, captured);
      return captured.text;
    };
    const assignee = node.assignee as SyntaxNode;
    if (assignee.type === 'Identifier') {
      const name = assignee.value as string;
      if (name === 'namespace') throw new NotCompiled('assigning namespace');
      return (scope) => scope.set(name, compute(scope));
    }
    if (assignee.type === 'TupleLiteral') {
      const names = (assignee.value as SyntaxNode[]).map((element) => {
        if (element.type !== 'Identifier' || element.value === 'namespace')
          throw new NotCompiled('unpacking to a non-name');
        return element.value as string;
      });
      return (scope) => {
        const result = compute(scope);
        if (!Array.isArray(result) || result.length !== names.length) throw new NotCompiled('unpacking in set');
        for (const [index, name] of names.entries()) scope.set(name, result[index]);
      };
    }
    if (assignee.type === 'MemberExpression') {
      const property = assignee.property as SyntaxNode;
      if (property.type !== 'Identifier' || assignee.computed) throw new NotCompiled('assigning a computed member');
      const object = this.expression(assignee.object as SyntaxNode);
      const name = property.value as string;
      return (scope) => {
        const rhs = compute(scope);
        const target = object(scope);
        if (!(target instanceof Namespace)) throw new NotCompiled('assigning to something that is not a namespace');
        target.entries.set(name, rhs);
      };
    }
    throw new NotCompiled('an assignment target');
  }

  expression(node: SyntaxNode): Expression {
    switch (node.type) {
      case 'StringLiteral':
      case 'IntegerLiteral': {
        const value = node.value;
        return () => value;
      }
      case 'ArrayLiteral':
      case 'TupleLiteral': {
        const items = (node.value as SyntaxNode[]).map((item) => this.expression(item));
        const tuple = node.type === 'TupleLiteral';
        return (scope) => {
          const values = items.map((item) => item(scope));
          return tuple ? Tuple.from(values) : values;
        };
      }
      case 'ObjectLiteral': {
        const entries = [...(node.value as Map<SyntaxNode, SyntaxNode>)].map(
          ([key, value]) => [this.expression(key), this.expression(value)] as const,
        );
        return (scope) => {
          const object: Record<string, unknown> = {};
          for (const [key, value] of entries) {
            const name = key(scope);
            if (typeof name !== 'string' || name === '__proto__') throw new NotCompiled('a mapping key');
            object[name] = value(scope);
          }
          return object;
        };
      }
      case 'Identifier': {
        const name = node.value as string;
        // Every scope of the library declares namespace() itself, so the name always means it
        // (assigning it is not compiled).
        if (name === 'namespace') return () => namespaceFunction;
        return (scope) => scope.get(name);
      }
      case 'MemberExpression':
        return this.memberExpression(node);
      case 'CallExpression':
        return this.callExpression(node);
      case 'UnaryExpression': {
        const argument = this.expression(node.argument as SyntaxNode);
        const operator = (node.operator as SyntaxNode).value as string;
        if (operator === 'not') return (scope) => !truthy(argument(scope));
        if (operator === '-' || operator === '+') {
          const sign = operator === '-' ? -1 : 1;
          return (scope) => {
            const value = argument(scope);
            if (typeof value === 'boolean') return sign * (value ? 1 : 0);
            return sign * integer(value, 'a sign on a non-integer');
          };
        }
        throw new NotCompiled(`unary ${operator}`);
      }
      case 'BinaryExpression': {
        const operator = (node.operator as SyntaxNode).value as string;
        const left = this.expression(node.left as SyntaxNode);
        const right = this.expression(node.right as SyntaxNode);
        if (operator === 'and')
          return (scope) => {
            const value = left(scope);
            return truthy(value) ? right(scope) : value;
          };
        if (operator === 'or')
          return (scope) => {
            const value = left(scope);
            return truthy(value) ? value : right(scope);
          };
        if (!['==', '!=', '~', '+', '-', '*', '<', '>', '<=', '>=', 'in', 'not in'].includes(operator))
          throw new NotCompiled(`operator ${operator}`);
        return (scope) => binary(operator, left(scope), right(scope));
      }
      case 'FilterExpression':
        return this.filterExpression(node);
      case 'TestExpression': {
        const operand = this.expression(node.operand as SyntaxNode);
        const name = (node.test as SyntaxNode).value as string;
        const test = Object.hasOwn(tests, name) ? tests[name] : undefined;
        if (!test) throw new NotCompiled(`test ${name}`);
        const negate = node.negate === true;
        return (scope) => test(operand(scope)) !== negate;
      }
      case 'Ternary': {
        const condition = this.expression(node.condition as SyntaxNode);
        const whenTrue = this.expression(node.trueExpr as SyntaxNode);
        const whenFalse = node.falseExpr ? this.expression(node.falseExpr as SyntaxNode) : () => undefined;
        return (scope) => (truthy(condition(scope)) ? whenTrue(scope) : whenFalse(scope));
      }
      case 'SelectExpression': {
        const test = this.expression(node.test as SyntaxNode);
        const value = this.expression(node.lhs as SyntaxNode);
        return (scope) => (truthy(test(scope)) ? value(scope) : undefined);
      }
      default:
        throw new NotCompiled(node.type);
    }
  }

  private memberExpression(node: SyntaxNode): Expression {
    const object = this.expression(node.object as SyntaxNode);
    const property = node.property as SyntaxNode;
    if (node.computed && property.type === 'SliceExpression') {
      const part = (field: string) =>
        property[field] ? this.expression(property[field] as SyntaxNode) : () => undefined;
      const [start, stop, step] = [part('start'), part('stop'), part('step')];
      return (scope) => {
        const target = object(scope);
        const bound = (value: unknown) => (value === undefined ? undefined : integer(value, 'a float slice bound'));
        const [from, to, by] = [bound(start(scope)), bound(stop(scope)), bound(step(scope))];
        if (Array.isArray(target)) return slice(target, from, to, by);
        if (typeof target === 'string') return slice(Array.from(target), from, to, by).join('');
        throw new NotCompiled('a slice of something that is not a list or string');
      };
    }
    if (node.computed) {
      const key = this.expression(property);
      return (scope) => {
        const target = object(scope);
        return member(target, key(scope));
      };
    }
    const name = property.value;
    return (scope) => member(object(scope), name);
  }

  private callExpression(node: SyntaxNode): Expression {
    const callee = this.expression(node.callee as SyntaxNode);
    const { positional, keywords } = this.arguments(node.args);
    return (scope) => {
      const args = positional.map((argument) => argument(scope));
      const named = new Map(keywords.map(([name, value]) => [name, value(scope)] as const));
      const target = callee(scope);
      if (target === namespaceFunction) {
        if (args.length > 1) throw new NotCompiled('namespace with several arguments');
        const entries = new Map<string, unknown>();
        if (args.length === 1) {
          if (!isPlainObject(args[0])) throw new NotCompiled('namespace from something that is not a mapping');
          for (const [key, value] of Object.entries(args[0])) entries.set(key, value);
        }
        for (const [key, value] of named) entries.set(key, value);
        return new Namespace(entries);
      }
      if (named.size > 0) throw new NotCompiled('keyword arguments');
      if (target instanceof BoundMethod) return callMethod(target, args);
      if (typeof target === 'function') {
        // The library calls a JavaScript function with its arguments' raw values and converts the result.
        if (!args.every((argument) => argument === null || argument === undefined || isPrimitive(argument)))
          throw new NotCompiled('a function called with a list or mapping');
        const result = (target as (...values: unknown[]) => unknown)(...args) ?? null;
        if (Array.isArray(result) && !result.every(isPrimitive)) throw new NotCompiled('a function result');
        if (!isPrimitive(result) && result !== null && !Array.isArray(result))
          throw new NotCompiled('a function result');
        return result;
      }
      throw new NotCompiled('a call of something that is not a function');
    };
  }

  private arguments(nodes: unknown): {
    positional: Expression[];
    keywords: Array<readonly [string, Expression]>;
  } {
    const positional: Expression[] = [];
    const keywords: Array<readonly [string, Expression]> = [];
    for (const argument of (nodes as SyntaxNode[] | undefined) ?? []) {
      if (argument.type === 'KeywordArgumentExpression') {
        const name = (argument.key as SyntaxNode).value as string;
        if (keywords.some(([known]) => known === name)) throw new NotCompiled('a repeated keyword argument');
        keywords.push([name, this.expression(argument.value as SyntaxNode)]);
      } else if (argument.type === 'SpreadExpression' || argument.type === 'KeywordSpreadExpression') {
        throw new NotCompiled('argument unpacking');
      } else positional.push(this.expression(argument));
    }
    return { positional, keywords };
  }

  private filterExpression(node: SyntaxNode): Expression {
    const operand = this.expression(node.operand as SyntaxNode);
    const filter = node.filter as SyntaxNode;
    if (filter.type === 'Identifier') {
      const name = filter.value as string;
      const none = new Map<string, unknown>();
      return (scope) => applyFilter(name, false, operand(scope), [], none);
    }
    if (filter.type !== 'CallExpression' || (filter.callee as SyntaxNode).type !== 'Identifier')
      throw new NotCompiled('a filter');
    const name = (filter.callee as SyntaxNode).value as string;
    const { positional, keywords } = this.arguments(filter.args);
    return (scope) => {
      const value = operand(scope);
      const args = positional.map((argument) => argument(scope));
      const named = new Map(keywords.map(([key, argument]) => [key, argument(scope)] as const));
      return applyFilter(name, true, value, args, named);
    };
  }
}

/** A program compiled to a function of its variables, or undefined when it uses what is not compiled. */
export type CompiledProgram = (variables: Record<string, unknown>) => string;

export function compileProgram(program: unknown): CompiledProgram | undefined {
  const node = program as SyntaxNode;
  let body: Statement;
  try {
    body = new Compiler().block(node.body);
  } catch (error) {
    if (error instanceof NotCompiled) return undefined;
    throw error;
  }
  return (variables) => {
    // The library refuses to declare namespace, which every scope has.
    if (Object.hasOwn(variables, 'namespace')) throw new NotCompiled('a variable named namespace');
    const scope = new Scope();
    for (const [name, value] of Object.entries(variables)) scope.set(name, value);
    const out = { text: '' };
    body(scope, out);
    return out.text;
  };
}

/** For tests: the value classes compiled code creates. */
export const compiledValueTypes = { Namespace, Tuple, BoundMethod };
