import { WorkerMetrics } from './prometheus-worker-metrics';

/** One name for a cancel: a job its run's cancel stopped is counted as cancelled, not as a failure. */
describe('WorkerMetrics and a cancelled run', () => {
  it('counts jobs stopped by a cancel in hat_jobs_cancelled_total, not in hat_job_failures_total', async () => {
    const metrics = new WorkerMetrics({ queues: [], jobCounts: async () => ({}) });
    const job = { name: 'collect', processedOn: 1_000, finishedOn: 3_000 };
    metrics.jobFailed('collect', job, new Error('[RUN_CANCELLED] run r1 was cancelled'), true);
    metrics.jobFailed('collect', job, new Error('[TEACHER_UNAVAILABLE] down'), true);
    const text = await metrics.render();
    expect(text).toContain('hat_jobs_cancelled_total{queue="collect"} 1');
    expect(text).toContain('hat_job_failures_total{queue="collect",code="TEACHER_UNAVAILABLE"} 1');
    expect(text).not.toContain('code="RUN_CANCELLED"');
    expect(text).toContain('hat_job_duration_seconds_count{queue="collect",job="collect",outcome="cancelled"} 1');
    expect(text).toContain('hat_job_duration_seconds_count{queue="collect",job="collect",outcome="failed"} 1');
  });
});
