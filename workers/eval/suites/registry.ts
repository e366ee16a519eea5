import type { z } from 'zod';
import type { AnyEvalSuite } from './eval-suite';
import { customSuite } from './custom';
import { harnessVariantQaSuite } from './harness-variant-qa';
import { ifevalSuite } from './ifeval';
import { liveStreamQaSuite } from './live-stream-qa';

/**
 * The eval suites, in the order the stage plans, scores and reports them. Adding a suite: its
 * file (suites/<name>.ts, one `defineEvalSuite` object) and one entry here; nothing else names it.
 * Tests register theirs with `registerEvalSuite`.
 */
export const builtInEvalSuites = [liveStreamQaSuite, harnessVariantQaSuite, ifevalSuite, customSuite] as const;

const registered: AnyEvalSuite[] = [...(builtInEvalSuites as readonly AnyEvalSuite[])];

/** Every suite, in order. */
export function evalSuites(): readonly AnyEvalSuite[] {
  return registered;
}

export function findEvalSuite(name: string): AnyEvalSuite | undefined {
  return registered.find((suite) => suite.name === name);
}

/** The suite of a name the config parser already accepted (a missing one is a bug). */
export function evalSuiteOf(name: string): AnyEvalSuite {
  const suite = findEvalSuite(name);
  if (!suite) throw new Error(`eval suite "${name}" is not registered (suites: ${evalSuiteNames().join(', ')})`);
  return suite;
}

export function evalSuiteNames(): string[] {
  return registered.map((suite) => suite.name);
}

/** Adds a suite after the built-in ones (tests, plug-ins); a name already taken is refused. Returns a function that removes it. */
export function registerEvalSuite(suite: AnyEvalSuite): () => void {
  if (findEvalSuite(suite.name)) throw new Error(`eval suite "${suite.name}" is registered already`);
  registered.push(suite);
  return () => {
    const index = registered.indexOf(suite);
    if (index >= 0) registered.splice(index, 1);
  };
}

type BuiltInSuite = (typeof builtInEvalSuites)[number];

/** `suites:` of the config as parsed: each built-in suite's config, typed; registered ones by name. */
export type EvalSuiteConfigs = { [S in BuiltInSuite as S['name']]?: z.output<S['configSchema']> } & {
  [name: string]: unknown;
};
/** `suites:` as written (defaults not applied). */
export type EvalSuiteConfigInputs = { [S in BuiltInSuite as S['name']]?: z.input<S['configSchema']> } & {
  [name: string]: unknown;
};
/** One item of a built-in suite (a registered suite's items are `SuiteItem`s). */
export type BuiltInEvalItem = z.output<BuiltInSuite['itemSchema']>;
