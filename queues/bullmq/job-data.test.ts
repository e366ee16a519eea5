import { fastJobDataReader, parseJobData, partJobDataSchema, stageJobDataSchema } from './job-data';

const stageData = {
  v: 1,
  runId: 'run-1',
  stage: 'shard',
  seed: 's',
  artifactsRoot: 'file:///tmp/a',
  outputPrefix: 'runs/run-1/shard/',
  input: { inputs: ['x'] },
  inputHash: 'h',
};
const partData = { ...stageData, index: 0, count: 3 };

/**
 * Variations of valid data: each field of the schema changed, dropped, or set to values zod
 * accepts or refuses. The keys come from the schema itself, so a field added to it and not to
 * the hand-written reader fails here.
 */
function variations(base: Record<string, unknown>, schemaKeys: string[]): unknown[] {
  const values: unknown[] = [
    undefined,
    null,
    '',
    'x',
    0,
    1,
    -1,
    2.5,
    2 ** 53,
    Infinity,
    NaN,
    [],
    ['a'],
    [1],
    {},
    true,
    'plan',
    'fan-in',
    'other',
  ];
  const out: unknown[] = [base, null, [], 'text', 7, { ...base, extra: 1 }];
  for (const key of new Set([...Object.keys(base), ...schemaKeys])) {
    const { [key]: _dropped, ...rest } = base;
    out.push(rest);
    for (const value of values) out.push({ ...base, [key]: value });
  }
  return out;
}

describe('job data readers', () => {
  it.each([
    ['stage', stageJobDataSchema, stageData],
    ['part', partJobDataSchema, partData],
  ] as const)('read %s job data exactly as zod does, and leave what they refuse to zod', (_name, schema, base) => {
    const fast = fastJobDataReader(schema)!;
    let accepted = 0;
    for (const data of variations(base, Object.keys(schema.shape))) {
      const zod = schema.safeParse(data);
      const read = fast(data);
      if (read === undefined) continue;
      accepted++;
      expect(zod.success).toBe(true);
      expect(read).toStrictEqual(zod.data);
      expect(Object.keys(read as object)).toEqual(Object.keys(zod.data as object));
    }
    expect(accepted).toBeGreaterThan(20);
  });

  it('still names the field of bad job data', () => {
    expect(() => parseJobData(stageJobDataSchema, { ...stageData, runId: '' }, 'shard:7')).toThrow(/runId/);
    expect(() => parseJobData(partJobDataSchema, { ...partData, count: 0 }, 'shard:7')).toThrow(/count/);
  });
});
