import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { decodeParquet, encodeParquet, parquetMetadataOf, type ParquetColumn } from '../shared/artifacts/parquet-codec';

const columns: ParquetColumn[] = [
  { name: 'sample_id', type: 'STRING' },
  { name: 'input_ids', type: { list: 'INT32' } },
  { name: 'loss_mask', type: { list: 'INT32' } },
  { name: 'logprobs', type: { list: 'FLOAT' } },
  { name: 'reward', type: 'DOUBLE' },
  { name: 'tokens', type: 'INT64' },
  { name: 'tools', type: 'JSON' },
  { name: 'ok', type: 'BOOLEAN' },
  { name: 'note', type: 'STRING', nullable: true },
];

const rows = [
  {
    sample_id: '样本-1',
    input_ids: [151644, 8948, 198],
    loss_mask: [0, 1, 1],
    logprobs: [-0.5, -1.25, 0],
    reward: 0.875,
    tokens: 3,
    tools: [{ type: 'function' }],
    ok: true,
    note: '带货 🛍️',
  },
  {
    sample_id: 's2',
    input_ids: [],
    loss_mask: [],
    logprobs: [],
    reward: 0,
    tokens: 0,
    tools: [],
    ok: false,
    note: null,
  },
];

describe('parquet codec', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'hat-parquet-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('round-trips through our reader with declared types and footer metadata', async () => {
    const bytes = encodeParquet(columns, rows, { metadata: { schema_version: '1', tokenizer: 'abc' } });
    const back = await decodeParquet(bytes);
    expect(back).toEqual(rows.map((row) => ({ ...row, tokens: BigInt(row.tokens), tools: row.tools })));
    expect(await parquetMetadataOf(bytes)).toMatchObject({ schema_version: '1', tokenizer: 'abc' });
  });

  it('is read back with identical values by an independent reader (DuckDB)', async () => {
    const file = join(dir, 'shard.parquet');
    writeFileSync(file, encodeParquet(columns, rows));
    const instance = await DuckDBInstance.create(':memory:');
    const connection = await instance.connect();
    const result = await connection.runAndReadAll(`select * from read_parquet('${file}')`);
    const got = result.getRowsJson() as unknown[][];
    expect(got).toEqual([
      [
        '样本-1',
        [151644, 8948, 198],
        [0, 1, 1],
        [-0.5, -1.25, 0],
        0.875,
        '3',
        '[{"type":"function"}]',
        true,
        '带货 🛍️',
      ],
      ['s2', [], [], [], 0, '0', '[]', false, null],
    ]);
    connection.closeSync();
  });

  it('refuses a missing required value, naming the row and column', () => {
    expect(() => encodeParquet(columns, [{ ...rows[0], reward: undefined }])).toThrow(
      /row 0: column "reward" is required/,
    );
  });

  it('gives byte-identical files for the same rows', () => {
    expect(Buffer.from(encodeParquet(columns, rows)).equals(Buffer.from(encodeParquet(columns, rows)))).toBe(true);
  });
});
