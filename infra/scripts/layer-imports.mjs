#!/usr/bin/env node
// Lists the imports between the code's layers and between stage folders, and fails (exit 1) on any
// import the layer rules forbid. Run by `make test` (and so by CI); `--table` prints the full listing.
//
// Layers, lowest first (a file may import its own layer and the ones listed as allowed):
//   shared:<sub>      shared/                      -> (nothing of ours outside shared/); inside it
//                     sub-layers, lowest first, each importing only its own and lower ones:
//                     platform (errors, config, hash, random, log, metrics, report, artifacts,
//                     the files at shared/'s top) -> trajectory -> text -> harness -> models ->
//                     simulator -> eval
//   serve             serve/                       -> shared                       (`hat serve`, used by the CLI)
//   stage-kit         queues/stage-kit/            -> shared
//   stage:<name>      workers/<stage>/             -> shared, stage-kit            (never another stage)
//   bullmq            queues/bullmq/               -> shared, stage-kit
//   runs              queues/runs/                 -> shared, stage-kit, bullmq
//   run-stage:<name>  workers/run/, workers/gate/  -> shared, stage-kit, bullmq, runs
//   wiring            workers/*.ts                 -> everything above except cli
//   cli               cli/                         -> everything except bench and test (serve included)
// Tests (*.test.ts, test/) and bench/ may import anything; nothing may import them.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const rootFlag = process.argv.indexOf('--root');
const root =
  rootFlag > 0 ? resolve(process.argv[rootFlag + 1]) : resolve(dirname(new URL(import.meta.url).pathname), '..', '..');
const sharedOrder = ['platform', 'trajectory', 'text', 'harness', 'models', 'simulator', 'eval'];
const platform = new Set(['errors', 'config', 'hash', 'random', 'log', 'metrics', 'report', 'artifacts']);
const runStages = new Set(['run', 'gate']);

/** The layer of a repository-relative path, or undefined for files outside the checked folders. */
function layerOf(path) {
  const parts = path.split('/');
  if (parts[0] === 'shared') {
    const sub = parts.length === 2 || platform.has(parts[1]) ? 'platform' : parts[1];
    return `shared:${sharedOrder.includes(sub) ? sub : 'unlisted'}`;
  }
  if (parts[0] === 'serve') return 'serve';
  if (parts[0] === 'queues') return ['stage-kit', 'bullmq', 'runs'].includes(parts[1]) ? parts[1] : 'queues-root';
  if (parts[0] === 'workers') {
    if (parts.length === 2) return 'wiring';
    if (parts[1] === 'examples') return `stage:examples/${parts[2]}`;
    return runStages.has(parts[1]) ? `run-stage:${parts[1]}` : `stage:${parts[1]}`;
  }
  if (parts[0] === 'cli') return 'cli';
  if (parts[0] === 'bench') return 'bench';
  if (parts[0] === 'test') return 'test';
  return undefined;
}

const allowed = {
  shared: [],
  serve: ['shared'],
  'stage-kit': ['shared'],
  stage: ['shared', 'stage-kit'],
  bullmq: ['shared', 'stage-kit'],
  runs: ['shared', 'stage-kit', 'bullmq'],
  'run-stage': ['shared', 'stage-kit', 'bullmq', 'runs'],
  wiring: ['shared', 'stage-kit', 'stage', 'bullmq', 'runs', 'run-stage', 'wiring'],
  cli: ['shared', 'serve', 'stage-kit', 'stage', 'bullmq', 'runs', 'run-stage', 'wiring', 'cli'],
};
const kindOf = (layer) => layer.split(':')[0];

function isAllowed(fromLayer, toLayer, isTest) {
  if (fromLayer === toLayer) return true;
  if (isTest || fromLayer === 'bench' || fromLayer === 'test') return toLayer !== 'queues-root';
  if (kindOf(fromLayer) === 'shared' && kindOf(toLayer) === 'shared') {
    const [from, to] = [fromLayer, toLayer].map((layer) => sharedOrder.indexOf(layer.split(':')[1]));
    return from >= 0 && to >= 0 && to <= from;
  }
  if (toLayer === 'bench' || toLayer === 'test' || toLayer === 'queues-root') return false;
  const rule = allowed[kindOf(fromLayer)];
  return rule !== undefined && rule.includes(kindOf(toLayer));
}

function* sourceFiles(dir) {
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'dist' || name.startsWith('.')) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* sourceFiles(path);
    else if (/\.(ts|mts|js)$/.test(name) && !name.endsWith('.d.ts')) yield path;
  }
}

const specifierPattern =
  /(?:\bfrom\s*|\bimport\s*\(\s*|\brequire\s*\(\s*|\bjest\.(?:mock|requireActual)\s*\(\s*|^\s*import\s+)['"](\.{1,2}\/[^'"]+)['"]/gm;
const counts = new Map();
const violations = [];
for (const top of ['shared', 'serve', 'queues', 'workers', 'cli', 'bench', 'test']) {
  if (!existsSync(join(root, top))) continue;
  for (const file of sourceFiles(join(root, top))) {
    const from = relative(root, file);
    const fromLayer = layerOf(from);
    const isTest = /\.test\.ts$/.test(from);
    const text = readFileSync(file, 'utf8');
    for (const match of text.matchAll(specifierPattern)) {
      const to = relative(root, resolve(dirname(file), match[1]));
      const toLayer = layerOf(to);
      if (toLayer === undefined || fromLayer === undefined) continue;
      const key = `${fromLayer}${isTest ? ' (tests)' : ''} -> ${toLayer}`;
      counts.set(key, (counts.get(key) ?? 0) + 1);
      if (fromLayer === 'queues-root' || !isAllowed(fromLayer, toLayer, isTest)) {
        const line = text.slice(0, match.index).split('\n').length;
        violations.push(`${from}:${line}: ${fromLayer} must not import ${toLayer} (${match[1]})`);
      }
    }
  }
}

if (process.argv.includes('--table')) {
  console.log('imports between layers (importer -> imported: count); same-layer imports included');
  for (const [key, count] of [...counts].sort(([a], [b]) => a.localeCompare(b))) console.log(`  ${key}: ${count}`);
}
if (violations.length > 0) {
  console.error(`layer-imports: ${violations.length} forbidden import(s):`);
  for (const v of violations) console.error(`  ${v}`);
  console.error(
    'Move the helper both sides need down a layer (shared/ for code several stages use; inside shared/, the lower sub-layer).',
  );
  process.exit(1);
}
console.log(`layer-imports: no forbidden imports (${[...counts.values()].reduce((a, b) => a + b, 0)} imports checked)`);
