import { cgroupCpuQuota, cpuBudget } from './cpu-budget';

const files = (entries: Record<string, string>) => (path: string) => entries[path];

describe('CPU budget', () => {
  it('reads the cgroup v2 quota, rounding up to whole cores', () => {
    expect(cgroupCpuQuota(files({ '/sys/fs/cgroup/cpu.max': '200000 100000\n' }))).toBe(2);
    expect(cgroupCpuQuota(files({ '/sys/fs/cgroup/cpu.max': '150000 100000' }))).toBe(2);
    expect(cgroupCpuQuota(files({ '/sys/fs/cgroup/cpu.max': '50000 100000' }))).toBe(1);
    expect(cgroupCpuQuota(files({ '/sys/fs/cgroup/cpu.max': 'max 100000' }))).toBeUndefined();
  });

  it('falls back to cgroup v1, and to no quota when neither is readable or set', () => {
    const v1 = { '/sys/fs/cgroup/cpu/cpu.cfs_quota_us': '400000', '/sys/fs/cgroup/cpu/cpu.cfs_period_us': '100000' };
    expect(cgroupCpuQuota(files(v1))).toBe(4);
    expect(cgroupCpuQuota(files({ ...v1, '/sys/fs/cgroup/cpu/cpu.cfs_quota_us': '-1' }))).toBeUndefined();
    expect(cgroupCpuQuota(files({}))).toBeUndefined();
  });

  it('is at least one core', () => {
    expect(cpuBudget()).toBeGreaterThanOrEqual(1);
  });
});
