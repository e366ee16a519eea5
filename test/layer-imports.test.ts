import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

/** The layer lint on a small tree: it allows imports down the layers and names one that goes up, inside shared/ too. */

const script = join(__dirname, '..', 'infra', 'scripts', 'layer-imports.mjs');

function lint(files: Record<string, string>) {
  const root = mkdtempSync(join(tmpdir(), 'hat-layers-'));
  try {
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(root, path)), { recursive: true });
      writeFileSync(join(root, path), text);
    }
    return spawnSync(process.execPath, [script, '--root', root], { encoding: 'utf8' });
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

const tree = {
  'shared/errors/index.ts': 'export const e = 1;\n',
  'shared/text/render.ts': "import { e } from '../errors';\nexport const r = e;\n",
  'shared/simulator/room.ts': "import { r } from '../text/render';\nexport const room = r;\n",
  'serve/server.ts': "import { r } from '../shared/text/render';\nexport const s = r;\n",
  'cli/main.ts':
    "import { s } from '../serve/server';\nimport { room } from '../shared/simulator/room';\nexport const m = [s, room];\n",
};

it('passes a tree whose imports go down the layers', () => {
  const result = lint(tree);
  expect([result.status, result.stdout]).toEqual([
    0,
    expect.stringMatching(/no forbidden imports \(5 imports checked\)/),
  ]);
});

it('fails on an import up the shared sub-layers, naming the file, line and layers', () => {
  const result = lint({
    ...tree,
    'shared/text/render.ts':
      "import { e } from '../errors';\nimport { room } from '../simulator/room';\nexport const r = [e, room];\n",
  });
  expect(result.status).toBe(1);
  expect(result.stderr).toMatch(
    /shared\/text\/render\.ts:2: shared:text must not import shared:simulator \(\.\.\/simulator\/room\)/,
  );
});

it('fails when shared/ or serve/ imports the CLI, and when serve/ is imported by a stage', () => {
  const result = lint({
    ...tree,
    'serve/server.ts': "import { m } from '../cli/main';\nexport const s = m;\n",
    'workers/collect/processor.ts': "import { s } from '../../serve/server';\nexport const p = s;\n",
  });
  expect(result.status).toBe(1);
  expect(result.stderr).toMatch(/serve\/server\.ts:1: serve must not import cli/);
  expect(result.stderr).toMatch(/workers\/collect\/processor\.ts:1: stage:collect must not import serve/);
});
