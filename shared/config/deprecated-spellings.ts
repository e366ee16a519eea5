/**
 * Old spellings a config schema still reads (e.g. `engine: vllm` for `adapter: vllm`): the schema
 * notes the object that holds one while it parses (`noteDeprecatedSpelling`), and whoever parses
 * a file collects the notes with their paths (`collectDeprecatedSpellings`) to print one warning
 * each. Zod parses synchronously, so one collector at a time is all there is; outside a collector
 * a note is dropped (a worker parsing job data has no file to name, and the CLI warned already).
 */

/** A deprecated spelling found in a config: where, and what to write instead. */
export interface DeprecatedSpelling {
  /** From the parsed root to the deprecated key. */
  path: Array<string | number>;
  message: string;
}

interface Note {
  holder: object;
  key: string;
  message: string;
}

let active: Note[] | undefined;

/** Called by a schema while it parses: `holder` (the object as written) spells `key` the old way. */
export function noteDeprecatedSpelling(holder: object, key: string, message: string): void {
  active?.push({ holder, key, message });
}

/** Where `target` sits under `root` (by identity), undefined when it does not. */
function pathOf(root: unknown, target: object, seen = new Set<object>()): Array<string | number> | undefined {
  if (root === target) return [];
  if (typeof root !== 'object' || root === null || seen.has(root)) return undefined;
  seen.add(root);
  for (const [key, value] of Object.entries(root)) {
    const below = pathOf(value, target, seen);
    if (below) return [Array.isArray(root) ? Number(key) : key, ...below];
  }
  return undefined;
}

/**
 * Runs `parse` (a synchronous schema parse of `root`) and returns its result with the deprecated
 * spellings it met, each with its path under `root`, once per path.
 */
export function collectDeprecatedSpellings<T>(
  root: unknown,
  parse: () => T,
): { result: T; spellings: DeprecatedSpelling[] } {
  const previous = active;
  const notes: Note[] = [];
  active = notes;
  let result: T;
  try {
    result = parse();
  } finally {
    active = previous;
  }
  const spellings = new Map<string, DeprecatedSpelling>();
  for (const note of notes) {
    const path = pathOf(root, note.holder);
    if (path === undefined) continue;
    const full = [...path, note.key];
    spellings.set(JSON.stringify(full), { path: full, message: note.message });
  }
  return { result, spellings: [...spellings.values()] };
}
