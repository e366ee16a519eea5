import type { FlowJob } from 'bullmq';
import { registerCatalogStages } from '../../workers/stage-catalog';
import { buildRunFlow, treeParents } from './flows';
import { planRun } from './run-config';

const stage = (name: string, dependsOn: string[] = []) => ({ name, dependsOn });

describe('treeParents', () => {
  it('puts independent stages directly under the run', () => {
    expect([...treeParents([stage('a'), stage('b')])]).toEqual([
      ['a', undefined],
      ['b', undefined],
    ]);
  });

  it('mirrors references when every stage feeds at most one other', () => {
    // c reads a and b; d reads c: d -> c -> {a, b}
    expect(
      Object.fromEntries(treeParents([stage('a'), stage('b'), stage('c', ['a', 'b']), stage('d', ['c'])])),
    ).toEqual({ a: 'c', b: 'c', c: 'd', d: undefined });
  });

  it('chains a component in dependency order when one stage feeds several', () => {
    // b and c both read a (a job has one parent): a under b under c, e stays apart
    expect(Object.fromEntries(treeParents([stage('c', ['a']), stage('b', ['a']), stage('a'), stage('e')]))).toEqual({
      a: 'c',
      c: 'b',
      b: undefined,
      e: undefined,
    });
  });
});

describe('buildRunFlow', () => {
  registerCatalogStages();
  const plan = planRun(
    {
      runId: 'flow1',
      stages: { noop: { inputs: ['${stages.fanout-demo.manifestUri}'] }, 'fanout-demo': { parts: 2 } },
    },
    { env: { HAT_ARTIFACTS: 'file:///data' }, now: new Date('2025-01-01T00:00:00Z') },
  );

  it('builds run -> reading stage -> upstream stage, with failure options by position and ids without ":"', () => {
    const flow = buildRunFlow(plan, { jobDataLimit: 64 * 1024 });
    expect(flow).toMatchObject({
      name: 'run',
      queueName: 'runs',
      opts: { jobId: 'flow1' },
      data: { runId: 'flow1', stages: [{ name: 'noop' }, { name: 'fanout-demo' }] },
    });
    const [noop] = flow.children as FlowJob[];
    expect(noop).toMatchObject({
      name: 'stage',
      queueName: 'noop',
      opts: { ignoreDependencyOnFailure: true },
      data: { upstream: ['fanout-demo'], step: 'plan' },
    });
    expect(noop?.opts?.failParentOnFailure).toBeUndefined();
    const [fanout] = noop?.children as FlowJob[];
    expect(fanout).toMatchObject({
      queueName: 'fanout-demo',
      opts: { failParentOnFailure: true, attempts: 4 },
      data: { outputPrefix: 'runs/flow1/fanout-demo/', upstream: [] },
    });
    const ids = [flow.opts?.jobId, noop?.opts?.jobId, fanout?.opts?.jobId];
    for (const id of ids) expect(id).not.toContain(':');
  });

  it('refuses job data over the limit, naming the stage', () => {
    expect(() => buildRunFlow(plan, { jobDataLimit: 200 })).toThrow(
      /\[JOB_DATA_TOO_LARGE\] job data for stage "(noop|fanout-demo)"/,
    );
  });
});
