import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import semver from 'semver';

/**
 * One supported Node range: package.json's engines.node, checked by both README commands before
 * they install (infra/scripts/check-node.mjs). Every installed package that declares an engines
 * range must accept the lowest version of each part of ours.
 */
describe('the supported Node.js range', () => {
  const root = join(__dirname, '..');
  const range = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { engines: { node: string } }).engines
    .node;
  const lowest = range.split('||').map((part) => semver.minVersion(part.trim())!.version);

  it('is accepted by every installed dependency', () => {
    const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { engines?: { node?: string } | string[]; optional?: boolean }>;
    };
    const refused: string[] = [];
    for (const [path, entry] of Object.entries(lock.packages)) {
      const engines = entry.engines;
      if (path === '' || engines === undefined || Array.isArray(engines) || engines.node === undefined) continue;
      if (entry.optional && !existsSync(join(root, path))) continue;
      for (const version of lowest)
        if (!semver.satisfies(version, engines.node)) refused.push(`${path} (${engines.node}) refuses ${version}`);
    }
    expect(lowest.length).toBeGreaterThan(0);
    expect(refused).toEqual([]);
  });

  it('includes the Node.js running the tests', () => {
    expect(semver.satisfies(process.versions.node, range)).toBe(true);
  });
});
