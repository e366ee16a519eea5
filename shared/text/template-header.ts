/**
 * The leading statements of a chat template whose output is the same for every conversation that
 * shares its tools list and first message: the system-and-tools header of Qwen-style templates.
 * Span location renders every prefix of a conversation (one served prompt per assistant turn),
 * and for short prefixes that header is most of the work (the tools' `tojson` alone is more than
 * half of a two-message render of the sample harness), so ChatTemplate renders it once per tools
 * list, first message and switches, and runs the rest of the program for each prefix.
 *
 * Exact because of what a leading statement may do here, checked on its syntax tree:
 * - read only `tools`, `messages[0]` (a literal index 0; any other use of `messages` disqualifies
 *   it), the caller's switches (`add_generation_prompt`, `enable_thinking`), the special-token
 *   variables, the constants every rendering gets (`true`, `none`, `range`...), its own loop
 *   variables and `loop`, and call `raise_exception`;
 * - assign nothing and define nothing (no `set`, macro, call block or filter block), so the
 *   statements after it start from the same variables whether it ran or not.
 * A program's output is its statements' outputs concatenated, so the header's cached output plus
 * the rest of the program's output is the whole rendering.
 */

/** A node of @huggingface/jinja's syntax tree, as far as this check reads it. */
interface SyntaxNode {
  type: string;
  [field: string]: unknown;
}

/** Statements that assign or define something the following statements could see. */
const definingStatements = new Set(['Set', 'SetStatement', 'Macro', 'CallStatement', 'FilterStatement']);

function isNode(value: unknown): value is SyntaxNode {
  return value !== null && typeof value === 'object' && typeof (value as SyntaxNode).type === 'string';
}

function loopVariables(node: unknown): string[] {
  if (!isNode(node)) return [];
  if (node.type === 'Identifier') return [node.value as string];
  return Array.isArray(node.value) ? (node.value as unknown[]).flatMap(loopVariables) : [];
}

/** The child values of a node worth walking: nodes, arrays of nodes, and the entries of object literals. */
function children(node: SyntaxNode): unknown[] {
  const found: unknown[] = [];
  for (const [field, value] of Object.entries(node)) {
    if (field === 'type') continue;
    if (value instanceof Map) for (const [key, item] of value) found.push(key, item);
    else found.push(value);
  }
  return found;
}

class HeaderCheck {
  constructor(private readonly allowed: ReadonlySet<string>) {}

  /** Whether `value` (a node, an array of nodes, or a plain field) stays within the rules above. */
  check(value: unknown, declared: ReadonlySet<string>): boolean {
    if (Array.isArray(value)) return value.every((item) => this.check(item, declared));
    if (value instanceof Map)
      return [...value].every(([key, item]) => this.check(key, declared) && this.check(item, declared));
    if (!isNode(value)) return true;
    const node = value;
    if (definingStatements.has(node.type)) return false;
    switch (node.type) {
      case 'Identifier': {
        const name = node.value as string;
        return declared.has(name) || name === 'loop' || this.allowed.has(name);
      }
      case 'MemberExpression': {
        const object = node.object as SyntaxNode;
        if (object.type === 'Identifier' && object.value === 'messages') {
          const property = node.property as SyntaxNode;
          return node.computed === true && property.type === 'IntegerLiteral' && property.value === 0;
        }
        return this.check(object, declared) && (node.computed !== true || this.check(node.property, declared));
      }
      case 'FilterExpression': {
        // The filter's name is not a variable; a filter call's arguments are expressions.
        const filter = node.filter as SyntaxNode;
        return (
          this.check(node.operand, declared) && (filter.type === 'Identifier' || this.check(filter.args, declared))
        );
      }
      case 'TestExpression':
        // The test's name (`defined`, `string`) is not a variable.
        return this.check(node.operand, declared);
      case 'KeywordArgumentExpression':
        return this.check(node.value, declared);
      case 'CallExpression': {
        const callee = node.callee as SyntaxNode;
        // A named function may be anything the caller passed; only raise_exception is known to be pure here.
        if (callee.type === 'Identifier' && callee.value !== 'raise_exception') return false;
        return this.check(callee, declared) && this.check(node.args, declared);
      }
      case 'For': {
        const inside = new Set([...declared, ...loopVariables(node.loopvar)]);
        return (
          this.check(node.iterable, declared) &&
          this.check(node.body, inside) &&
          this.check(node.defaultBlock, declared)
        );
      }
      default:
        return children(node).every((child) => this.check(child, declared));
    }
  }
}

/**
 * How many of the program's leading statements form its header (0 when the first one already
 * breaks a rule). `variables` are the names a rendering may read besides `tools` and
 * `messages[0]`: the switches, special tokens and constants.
 */
export function headerStatementCount(body: readonly unknown[], variables: Iterable<string>): number {
  const check = new HeaderCheck(new Set(['tools', 'raise_exception', ...variables]));
  let count = 0;
  while (count < body.length && check.check(body[count], new Set())) count++;
  // A header that reads neither tools nor the first message saves nothing worth a cache entry,
  // but is still exact; a program that is all header has nothing per prefix left to run.
  return count === body.length ? 0 : count;
}
