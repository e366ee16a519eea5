/**
 * Cancellation of the jobs one in-process worker runs, without an AbortController per job.
 *
 * BullMQ gives a processor that declares three parameters a fresh AbortController per job; making
 * one (an EventTarget), listening on it and collecting it cost about a third of the binding's own
 * time per no-op job (bench/framework.bench.ts). The stage worker therefore declares two
 * parameters and keeps its own registry: a job's AbortSignal is made only when the stage reads
 * `deps.signal`, and the binding's hand-back on shutdown is a plain callback. `worker.cancelJob`
 * and `worker.cancelAllJobs` (closeWorkersWithin) reach the registry (see worker-factory.ts).
 */

/** The cancellation state of one running job. */
export class JobCancel {
  private controller: AbortController | undefined;
  private cancelledWith: { reason: unknown } | undefined;
  /** Called once when the job is cancelled (the binding hands the job back). */
  onCancel: (() => void) | undefined;

  /** An already-made signal (sandboxed jobs: BullMQ's); its abort cancels this job. */
  constructor(
    private readonly external?: AbortSignal,
    readonly jobId?: string,
  ) {
    if (!external) return;
    if (external.aborted) this.cancelledWith = { reason: external.reason as unknown };
    else {
      this.onExternalAbort = () => this.cancel(external.reason);
      external.addEventListener('abort', this.onExternalAbort, { once: true });
    }
  }

  get cancelled(): boolean {
    return this.cancelledWith !== undefined;
  }

  /** What the job was cancelled with (undefined while it is not). */
  get reason(): unknown {
    return this.cancelledWith?.reason;
  }

  /** The job's signal, made on first use (aborted already when the job was cancelled before). */
  get signal(): AbortSignal {
    if (this.external) return this.external;
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.cancelledWith) this.controller.abort(this.cancelledWith.reason);
    }
    return this.controller.signal;
  }

  cancel(reason?: unknown): void {
    if (this.cancelledWith) return;
    this.cancelledWith = { reason };
    this.controller?.abort(reason);
    this.onCancel?.();
  }

  /** Stops listening to an external signal. */
  dispose(): void {
    if (this.onExternalAbort) this.external?.removeEventListener('abort', this.onExternalAbort);
  }

  /** Made only for an external signal: an in-process job (most of them) allocates no listener. */
  private onExternalAbort: (() => void) | undefined;
}

/** The running jobs of one worker (a set: cancelling one job by id is rare, starting one is not). */
export class JobCancels {
  private readonly running = new Set<JobCancel>();

  /** Registers a job that starts; `end` it when it settles. */
  start(jobId: string | undefined): JobCancel {
    const cancel = new JobCancel(undefined, jobId);
    this.running.add(cancel);
    return cancel;
  }

  end(cancel: JobCancel): void {
    this.running.delete(cancel);
  }

  /** Cancels one running job; whether it was running here. */
  cancel(jobId: string, reason?: unknown): boolean {
    let found = false;
    for (const cancel of this.running) {
      if (cancel.jobId !== jobId) continue;
      cancel.cancel(reason);
      found = true;
    }
    return found;
  }

  cancelAll(reason?: unknown): void {
    for (const cancel of this.running) cancel.cancel(reason);
  }
}
