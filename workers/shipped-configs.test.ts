import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { planRun, readConfigFile } from '../queues/runs/run-config';
import { getStage } from '../queues/stage-kit/stage-registry';
import { collectDeprecatedSpellings } from '../shared/config/deprecated-spellings';
import type { Problem } from '../shared/errors';
import { registerCatalogStages } from './stage-catalog';

/**
 * The configs shipped in examples/ are what users copy: each plans (run configs) or parses (stage
 * configs) with no deprecated spelling, so none teaches an old one (`engine:` for `adapter:`).
 */
registerCatalogStages();

const runConfigs = ['demo-run.yaml', 'nightly.yaml', 'hat-effect.yaml'];
const stageConfigs = { 'distill-stage.yaml': 'distill' };

it.each(runConfigs)('examples/%s plans with no deprecated spelling', async (name) => {
  const file = join('examples', name);
  const source = await readConfigFile(file);
  const warnings: Problem[] = [];
  planRun(source.value, {
    env: { HAT_ARTIFACTS: 'file:///tmp/hat-shipped-configs' },
    now: new Date('2025-01-31T02:00:00Z'),
    file,
    locator: source.locator,
    onDeprecatedSpelling: (warning) => warnings.push(warning),
  });
  expect(warnings).toEqual([]);
});

it.each(Object.entries(stageConfigs))(
  'examples/%s parses as a %s stage config with no deprecated spelling',
  async (name, stage) => {
    const source = await readConfigFile(join('examples', name), 'stage config');
    const { result, spellings } = collectDeprecatedSpellings(source.value, () =>
      getStage(stage).input.safeParse(source.value),
    );
    expect(result.error?.issues ?? []).toEqual([]);
    expect(spellings).toEqual([]);
  },
);

it('names every shipped YAML config above', async () => {
  const shipped = (await readdir('examples')).filter((name) => name.endsWith('.yaml'));
  expect(shipped.sort()).toEqual([...runConfigs, ...Object.keys(stageConfigs)].sort());
});
