/**
 * The worker loop: claims queued tasks whose required capabilities the node declared (`POST /api/task/assign`,
 * only while the node is online), runs the application's handler for each, renews the lease while it runs
 * (`POST /api/task/<id>/progress` every third of the lease, which also says when the submitter canceled), and
 * reports the outcome (`complete` with the handler's result, `fail` with its error's message). A canceled task or a
 * lost claim (409: the lease lapsed and someone else holds it) aborts the handler's signal and reports nothing.
 */
import { Backoff, HubHttp, isTransient, retryAfterMs, sleep } from './http';
import type { Logger } from './logger';
import { Wake } from './wake';

export interface ClaimedTask {
  task_id: string;
  type: string;
  payload: Record<string, unknown>;
  required_capabilities: string[];
  priority: number;
  attempts: number;
  lease_expires_at: string | null;
  context_id: string | null;
}

export interface TaskContext {
  /** Aborted when the submitter cancels, the claim is lost or the node stops: stop working then. */
  signal: AbortSignal;
  /** Reports progress (also renews the lease). */
  progress(note?: string): Promise<void>;
}

/** Runs one task; resolves with its result (a JSON object) or throws to fail it. */
export type TaskHandler = (task: ClaimedTask, context: TaskContext) => Promise<Record<string, unknown>>;

export type TaskEvent = { task_id: string; type: string } & (
  { state: 'claimed' | 'done' | 'canceled' | 'lost' } | { state: 'failed'; reason: string }
);

export interface WorkerOptions {
  http: HubHttp;
  authHeaders(): Record<string, string>;
  handler: TaskHandler;
  /** Tasks run at once (default 1). */
  maxTasks?: number;
  /** Between claims when nothing was queued (default 5 s). */
  pollMs?: number;
  maxBackoffMs?: number;
  log: Logger;
  onTask(event: TaskEvent): void;
}

export class TaskWorker {
  private readonly wake = new Wake();
  private readonly running = new Map<string, Promise<void>>();
  private readonly backoff: Backoff;

  constructor(private readonly options: WorkerOptions) {
    this.backoff = new Backoff(1000, options.maxBackoffMs ?? 30_000);
  }

  /** Claims at once rather than at the next poll (the node just came online). */
  kick(): void {
    this.wake.kick();
  }

  async run(signal: AbortSignal): Promise<void> {
    const { http, log } = this.options;
    const maxTasks = this.options.maxTasks ?? 1;
    const pollMs = this.options.pollMs ?? 5000;
    while (!signal.aborted) {
      let wait = pollMs;
      const free = maxTasks - this.running.size;
      if (free > 0) {
        try {
          const res = await http.request('POST', '/api/task/assign', {
            body: { max_tasks: free },
            headers: this.options.authHeaders(),
            signal
          });
          if (res.status === 200) {
            this.backoff.reset();
            for (const task of res.body.tasks as ClaimedTask[]) this.start(task, res.body.lease_s, signal);
            if (res.body.tasks.length > 0) wait = 0;
          } else if (isTransient(res.status)) {
            wait = this.backoff.next(retryAfterMs(res.headers));
          } else {
            // 403 while the node is pending review or offline: ask again at the next poll.
            log.debug('no claim', { status: res.status, code: res.body?.error });
          }
        } catch {
          if (signal.aborted) break;
          wait = this.backoff.next();
        }
      }
      await this.wake.wait(wait, signal);
    }
    await Promise.allSettled(this.running.values());
  }

  private start(task: ClaimedTask, leaseS: number, stop: AbortSignal): void {
    const work = this.work(task, leaseS, stop)
      .catch((err: Error) =>
        this.options.log.error('task worker failed', { task_id: task.task_id, error: err.message })
      )
      .finally(() => {
        this.running.delete(task.task_id);
        this.wake.kick();
      });
    this.running.set(task.task_id, work);
  }

  private async work(task: ClaimedTask, leaseS: number, stop: AbortSignal): Promise<void> {
    const { http, log, onTask } = this.options;
    const id = encodeURIComponent(task.task_id);
    const ended = new AbortController(); // the handler finished: the renewals stop
    const abort = new AbortController(); // canceled, lost or stopped: the handler stops
    const onStop = () => abort.abort('stopped');
    stop.addEventListener('abort', onStop, { once: true });
    let outcome: 'canceled' | 'lost' | undefined;

    const progress = async (note?: string) => {
      const line = note === undefined ? '' : oneLine(note, 500);
      const res = await http.request('POST', `/api/task/${id}/progress`, {
        body: line ? { note: line } : {},
        headers: this.options.authHeaders(),
        signal: stop
      });
      if (res.status === 200 && res.body.canceled) outcome = 'canceled';
      else if (res.status === 409 || res.status === 404) outcome = 'lost';
      if (outcome) abort.abort(outcome);
    };
    const renewals = (async () => {
      const every = Math.max(500, (leaseS * 1000) / 3);
      const both = AbortSignal.any([ended.signal, abort.signal]);
      while (!both.aborted) {
        await sleep(every, both);
        if (both.aborted) break;
        await progress().catch((err: Error) =>
          log.warn('lease renewal failed', { task_id: task.task_id, error: err.message })
        );
      }
    })();

    onTask({ task_id: task.task_id, type: task.type, state: 'claimed' });
    let result: Record<string, unknown> | undefined;
    let failure: string | undefined;
    try {
      result = await this.options.handler(task, { signal: abort.signal, progress });
    } catch (err) {
      failure = oneLine((err as Error)?.message || String(err), 1000) || 'failed';
    } finally {
      ended.abort();
      stop.removeEventListener('abort', onStop);
      await renewals;
    }
    if (stop.aborted) return; // the lease lapses and the hub queues the task again
    if (outcome) {
      onTask({ task_id: task.task_id, type: task.type, state: outcome });
      return;
    }
    const [path, body] =
      failure === undefined
        ? [`/api/task/${id}/complete`, { result: result ?? {} }]
        : [`/api/task/${id}/fail`, { reason: failure }];
    const backoff = new Backoff(1000, 8000);
    for (let attempt = 0; attempt < 5 && !stop.aborted; attempt++) {
      try {
        const res = await http.request('POST', path, { body, headers: this.options.authHeaders(), signal: stop });
        if (res.status === 200) {
          onTask(
            failure === undefined
              ? { task_id: task.task_id, type: task.type, state: 'done' }
              : { task_id: task.task_id, type: task.type, state: 'failed', reason: failure }
          );
          return;
        }
        if (res.status === 409 || res.status === 404) {
          onTask({ task_id: task.task_id, type: task.type, state: 'lost' });
          return;
        }
        if (!isTransient(res.status)) {
          const reason = `the hub refused the outcome: ${res.status} ${res.body?.message ?? ''}`;
          log.warn(reason, { task_id: task.task_id });
          onTask({ task_id: task.task_id, type: task.type, state: 'failed', reason });
          return;
        }
        await sleep(backoff.next(retryAfterMs(res.headers)), stop);
      } catch {
        await sleep(backoff.next(), stop);
      }
    }
    log.warn('could not report a task outcome; its lease will lapse', { task_id: task.task_id });
  }
}

/**
 * Text the hub shows people (a failure's reason, a progress note) is one line without control or bidirectional
 * formatting characters (docs/a2a.md): a multi-line error message (a command's stderr) is joined with spaces rather
 * than refused.
 */
export function oneLine(text: string, max: number): string {
  return text
    .replace(/[\u0000-\u001f\u007f-\u009f]+/g, ' ')
    .replace(/[\u202a-\u202e\u2066-\u2069]/g, '')
    .replace(/ {2,}/g, ' ')
    .trim()
    .slice(0, max)
    .trim();
}
