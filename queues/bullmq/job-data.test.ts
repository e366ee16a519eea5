import { parseJobData, partJobDataSchema, stageJobDataSchema } from './job-data';

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

describe('job data', () => {
  it('reads valid stage and part job data with defaults filled and unknown keys dropped', () => {
    expect(parseJobData(stageJobDataSchema, { ...stageData, extra: 1 }, 'shard:7')).toEqual({
      ...stageData,
      upstream: [],
      step: 'plan',
    });
    expect(parseJobData(partJobDataSchema, partData, 'shard:7:0')).toEqual(partData);
  });

  it('names the field of bad job data', () => {
    expect(() => parseJobData(stageJobDataSchema, { ...stageData, runId: '' }, 'shard:7')).toThrow(/runId/);
    expect(() => parseJobData(partJobDataSchema, { ...partData, count: 0 }, 'shard:7')).toThrow(/count/);
  });
});
