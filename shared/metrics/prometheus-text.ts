import { BadInputError } from '../errors';

/** One sample line of the Prometheus text exposition format. */
export interface PrometheusSample {
  name: string;
  labels: Record<string, string>;
  value: number;
  /** Milliseconds since the epoch, when the line carries a timestamp. */
  timestamp?: number;
}

const namePattern = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const labelNamePattern = /^[a-zA-Z_][a-zA-Z0-9_]*/;

/**
 * Parses Prometheus text format 0.0.4 (what vLLM's `/metrics` serves): `# HELP`/`# TYPE`
 * comments are skipped, label values are unescaped (`\\`, `\"`, `\n`), values may be `NaN`,
 * `+Inf` or `-Inf`. Written by hand because prom-client, the registry's Prometheus library,
 * only produces this format; the grammar is small and fixed.
 * Throws BadInputError `BAD_METRICS_TEXT` naming the line for anything else.
 */
export function parsePrometheusText(text: string, source = 'metrics'): PrometheusSample[] {
  const samples: PrometheusSample[] = [];
  const lines = text.split('\n');
  for (let lineIndex = 0; lineIndex < lines.length; lineIndex++) {
    const line = lines[lineIndex].replace(/\r$/, '').trim();
    if (line === '' || line.startsWith('#')) continue;
    samples.push(
      parseSampleLine(
        line,
        () =>
          new BadInputError(
            'BAD_METRICS_TEXT',
            `${source}: line ${lineIndex + 1} is not a Prometheus sample: ${line.slice(0, 160)}`,
          ),
      ),
    );
  }
  return samples;
}

function parseSampleLine(line: string, fail: () => Error): PrometheusSample {
  const name = namePattern.exec(line)?.[0];
  if (!name) throw fail();
  let rest = line.slice(name.length);
  const labels: Record<string, string> = {};
  if (rest.startsWith('{')) {
    rest = rest.slice(1);
    for (;;) {
      rest = rest.trimStart();
      if (rest.startsWith('}')) {
        rest = rest.slice(1);
        break;
      }
      const labelName = labelNamePattern.exec(rest)?.[0];
      if (!labelName) throw fail();
      rest = rest.slice(labelName.length).trimStart();
      if (!rest.startsWith('="')) throw fail();
      rest = rest.slice(2);
      let value = '';
      let closed = false;
      for (let index = 0; index < rest.length; index++) {
        const character = rest[index];
        if (character === '\\') {
          const next = rest[++index];
          value += next === 'n' ? '\n' : (next ?? '');
        } else if (character === '"') {
          rest = rest.slice(index + 1);
          closed = true;
          break;
        } else {
          value += character;
        }
      }
      if (!closed) throw fail();
      labels[labelName] = value;
      rest = rest.trimStart();
      if (rest.startsWith(',')) rest = rest.slice(1);
      else if (!rest.startsWith('}')) throw fail();
    }
  }
  const fields = rest.trim().split(/\s+/);
  if (fields.length < 1 || fields.length > 2 || fields[0] === '') throw fail();
  const value = parseValue(fields[0]);
  if (value === undefined) throw fail();
  const timestamp = fields[1] === undefined ? undefined : Number(fields[1]);
  if (timestamp !== undefined && !Number.isFinite(timestamp)) throw fail();
  return { name, labels, value, ...(timestamp !== undefined ? { timestamp } : {}) };
}

function parseValue(text: string): number | undefined {
  if (text === 'NaN') return Number.NaN;
  if (text === '+Inf' || text === 'Inf') return Number.POSITIVE_INFINITY;
  if (text === '-Inf') return Number.NEGATIVE_INFINITY;
  const value = Number(text);
  return Number.isNaN(value) || text === '' ? undefined : value;
}
