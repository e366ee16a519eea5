import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';

/**
 * CPU quota of this process's cgroup, in cores (rounded up), or undefined when none is set:
 * cgroup v2 `cpu.max` ("<quota> <period>" or "max <period>"), else v1's cfs quota and period.
 * Node's availableParallelism counts the CPUs the process may run on, not the quota, so a pod
 * limited to 2 CPUs on a 64-core node would otherwise start 64 threads.
 */
export function cgroupCpuQuota(read: (path: string) => string | undefined = readIfPresent): number | undefined {
  const v2 = read('/sys/fs/cgroup/cpu.max')?.trim().split(/\s+/);
  if (v2 && v2.length === 2) {
    if (v2[0] === 'max') return undefined;
    return coresOf(Number(v2[0]), Number(v2[1]));
  }
  const quota = read('/sys/fs/cgroup/cpu/cpu.cfs_quota_us');
  const period = read('/sys/fs/cgroup/cpu/cpu.cfs_period_us');
  if (quota === undefined || period === undefined) return undefined;
  return coresOf(Number(quota), Number(period));
}

function coresOf(quota: number, period: number): number | undefined {
  if (!Number.isFinite(quota) || !Number.isFinite(period) || quota <= 0 || period <= 0) return undefined;
  return Math.max(1, Math.ceil(quota / period));
}

function readIfPresent(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

/**
 * Cores this process may use: the CPUs it may run on, capped by its cgroup's quota. The default
 * number of jobs at once for CPU-bound stages: more threads than cores only adds contention,
 * memory and colder caches (at 10,000 tasks on 2 cores, 4 shard threads moved parts about 1.5x
 * slower than 2).
 */
export function cpuBudget(): number {
  const quota = cgroupCpuQuota();
  const cpus = availableParallelism();
  return quota === undefined ? cpus : Math.min(cpus, quota);
}
