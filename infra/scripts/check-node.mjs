#!/usr/bin/env node
// Checks the running Node.js against package.json's engines.node before anything is installed (both
// README commands run it first). Only the forms our range uses: `^X.Y.Z`, `>=X[.Y[.Z]]`, joined by `||`.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

const root = join(dirname(new URL(import.meta.url).pathname), '..', '..');
const range = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).engines.node;
const parse = (text) =>
  text
    .split('.')
    .map((part) => Number(part))
    .concat([0, 0, 0])
    .slice(0, 3);
const compare = (a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2];
const current = parse(process.versions.node);

function satisfies(clause) {
  const text = clause.trim();
  if (text.startsWith('^')) {
    const low = parse(text.slice(1));
    return current[0] === low[0] && compare(current, low) >= 0;
  }
  if (text.startsWith('>=')) return compare(current, parse(text.slice(2))) >= 0;
  throw new Error(`check-node: cannot read the engines.node clause "${text}"`);
}

if (!range.split('||').some(satisfies)) {
  console.error(
    `This project needs Node.js ${range} (every dependency accepts that range); this is Node.js ${process.versions.node}.`,
  );
  console.error('Install a supported Node.js (for example with nvm: nvm install 20) and run the command again.');
  process.exit(1);
}
