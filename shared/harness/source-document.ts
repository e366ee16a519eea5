import { LineCounter, parseDocument, isMap, isPair, isScalar, type Document, type Node as YamlNode } from 'yaml';
import type { ZodError } from 'zod';
import type { Problem } from '../errors';

/** A path into a parsed value: object keys and array indexes. */
export type PathSegment = string | number;

/** `prompt.sections[2].title`: the dot-path form every harness problem uses. */
export function formatPath(segments: readonly PathSegment[]): string {
  return segments
    .map((segment) => (typeof segment === 'number' ? `[${segment}]` : `.${segment}`))
    .join('')
    .replace(/^\./, '');
}

/**
 * One harness file, parsed once, that can say on which line a value sits. JSON files are parsed
 * with JSON.parse (strict JSON), and also as YAML (JSON is a YAML subset) only to map paths to
 * lines, so a tool file problem points at the line of the offending key.
 */
export class SourceDocument {
  /** The parsed value; undefined when the text does not parse. */
  readonly value: unknown;
  /** Syntax problems (with lines). */
  readonly syntaxProblems: Problem[] = [];
  /** The YAML document for line lookups; parsed on first use for JSON (most files have no problem). */
  private document?: Document | null;
  private readonly lineCounter = new LineCounter();

  /**
   * @param lineOffset lines before `text` in the file (front matter starts on line 2).
   */
  constructor(
    readonly file: string,
    private readonly text: string,
    readonly syntax: 'yaml' | 'json',
    private readonly lineOffset = 0,
  ) {
    if (syntax === 'yaml') {
      const document = this.parse();
      for (const error of document.errors) {
        this.syntaxProblems.push({ file, line: this.lineAt(error.pos[0]), message: `invalid YAML: ${error.message}` });
      }
      this.value = document.errors.length === 0 ? document.toJS({ maxAliasCount: 100 }) : undefined;
    } else {
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch (error) {
        const message = (error as Error).message;
        const position = /position (\d+)/.exec(message)?.[1];
        this.parse();
        this.syntaxProblems.push({
          file,
          line: position === undefined ? undefined : this.lineAt(Number(position)),
          message: `invalid JSON: ${message}`,
        });
      }
      this.value = value;
    }
  }

  private parse(): Document {
    const document = parseDocument(this.text, {
      lineCounter: this.lineCounter,
      prettyErrors: false,
      uniqueKeys: true,
      // `<<: *anchor` merges a shared block (run configs repeat stage settings across arms).
      merge: true,
    });
    this.document = document.errors.length === 0 ? document : null;
    return document;
  }

  /** Line of the value at `path`, or of its nearest ancestor present in the file. */
  lineOf(path: readonly PathSegment[]): number | undefined {
    if (this.document === undefined) this.parse();
    if (!this.document) return undefined;
    for (let length = path.length; length >= 0; length--) {
      const node = this.nodeAt(path.slice(0, length));
      if (node?.range) return this.lineAt(node.range[0]);
    }
    return undefined;
  }

  problem(path: readonly PathSegment[], message: string): Problem {
    return { file: this.file, path: path.length > 0 ? formatPath(path) : undefined, line: this.lineOf(path), message };
  }

  /** Every issue of a zod error as a problem at its path (relative to `prefix`). */
  zodProblems(error: ZodError, prefix: readonly PathSegment[] = []): Problem[] {
    const problems: Problem[] = [];
    for (const issue of error.issues) {
      const path = [...prefix, ...(issue.path as PathSegment[])];
      if (issue.code === 'unrecognized_keys') {
        for (const key of issue.keys)
          problems.push(
            this.problem([...path, key], `unknown key ${JSON.stringify(key)}; remove it or fix its spelling`),
          );
      } else if (issue.code === 'invalid_type' && / received undefined$/.test(issue.message)) {
        problems.push(this.problem(path, `missing; expected ${issue.expected}`));
      } else {
        problems.push(this.problem(path, issue.message));
      }
    }
    return problems;
  }

  private nodeAt(path: readonly PathSegment[]): YamlNode | undefined {
    if (!this.document) return undefined;
    const key = path[path.length - 1];
    // For an object key, point at the key itself (an unknown key has no value node worth showing).
    if (typeof key === 'string') {
      const parent = path.length === 1 ? this.document.contents : this.document.getIn(path.slice(0, -1), true);
      if (isMap(parent)) {
        const pair = parent.items.find((item) => isPair(item) && isScalar(item.key) && item.key.value === key);
        if (pair && isScalar(pair.key)) return pair.key;
      }
    }
    const node = path.length === 0 ? this.document.contents : this.document.getIn(path, true);
    return node && typeof node === 'object' && 'range' in node ? (node as YamlNode) : undefined;
  }

  private lineAt(offset: number): number {
    return this.lineCounter.linePos(offset).line + this.lineOffset;
  }
}
