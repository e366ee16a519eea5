import { BadInputError } from './hat-error';

/** One validation problem: where (file, dot-path, line) and what is wrong / what to do. */
export interface Problem {
  file?: string;
  path?: string;
  line?: number;
  message: string;
}

export function formatProblem(problem: Problem): string {
  const where = [problem.file, problem.line !== undefined ? `line ${problem.line}` : undefined, problem.path]
    .filter((part) => part !== undefined && part !== '')
    .join(': ');
  return where ? `${where}: ${problem.message}` : problem.message;
}

/**
 * Collects every problem of one validation pass so the user sees all of them at once,
 * then throws a single BadInputError listing them.
 */
export class ProblemCollector {
  readonly problems: Problem[] = [];

  add(problem: Problem): void {
    this.problems.push(problem);
  }

  addAll(problems: Iterable<Problem>): void {
    for (const problem of problems) this.add(problem);
  }

  get ok(): boolean {
    return this.problems.length === 0;
  }

  /** Throws when any problem was collected. */
  throwIfAny(code: string, summary: string): void {
    if (this.ok) return;
    throw new ValidationError(code, summary, this.problems);
  }
}

export class ValidationError extends BadInputError {
  readonly problems: Problem[];
  constructor(code: string, summary: string, problems: Problem[]) {
    const count = problems.length;
    super(
      code,
      `${summary} (${count} problem${count === 1 ? '' : 's'}):\n${problems.map((p) => `  - ${formatProblem(p)}`).join('\n')}`,
      {
        details: { problems },
      },
    );
    this.problems = problems;
  }
}
