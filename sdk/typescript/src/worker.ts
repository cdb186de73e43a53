/**
 * The worker loop: claims queued tasks whose required capabilities the node declared (`POST /api/task/assign`,
 * only while the node is online), runs the application's handler for each, renews the lease while it runs
 * (`POST /api/task/<id>/progress` every third of the lease, which also says when the submitter canceled), and
 * reports the outcome (`complete` with the handler's result, `fail` with its error's message). A canceled task or a
 * lost claim (409: the lease lapsed and someone else holds it) aborts the handler's signal and reports nothing.
 * While it works, a handler may send A2A artifacts (`context.artifact`, `POST /api/task/<id>/artifact`) and ask the
 * submitter for more (`context.askForInput`, `POST /api/task/<id>/input-required`: the task waits without a lease;
 * the submitter's answer hands it back to this node with the conversation in `task.history`). It completes with a
 * result, or with a `TaskCompletion`: a result, artifacts and a Message as the answer (docs/a2a.md, the node API).
 */
import { Backoff, HubHttp, isTransient, retryAfterMs, sleep } from './http';
import type { Logger } from './logger';
import { Wake } from './wake';

/** An A2A Part as the hub takes it from a node: one of text, raw (base64), url or data. */
export interface TaskPart {
  text?: string;
  raw?: string;
  url?: string;
  data?: unknown;
  metadata?: Record<string, unknown>;
  filename?: string;
  mediaType?: string;
}

/** A Message from the node: a question (askForInput) or an answer (TaskCompletion). A string is one text part. */
export type TaskMessage = { parts: TaskPart[]; metadata?: Record<string, unknown> } | string;

/** An A2A Artifact, in A2A's JSON names, as the submitter will see it. */
export interface TaskArtifact {
  artifactId: string;
  name?: string;
  description?: string;
  parts: TaskPart[];
  metadata?: Record<string, unknown>;
  extensions?: string[];
}

/** What a handler may return instead of a plain result: any of a result, artifacts and a Message as the answer. */
export class TaskCompletion {
  constructor(
    readonly outcome: { result?: Record<string, unknown>; artifacts?: TaskArtifact[]; message?: TaskMessage }
  ) {
    if (outcome.result === undefined && outcome.artifacts === undefined && outcome.message === undefined)
      throw new TypeError('a TaskCompletion has a result, artifacts or a message');
  }
}

const asMessage = (m: TaskMessage) => (typeof m === 'string' ? { parts: [{ text: m }] } : m);

export interface ClaimedTask {
  task_id: string;
  type: string;
  payload: Record<string, unknown>;
  /** The conversation after the payload's message, oldest first: this node's questions and the submitter's answers. */
  history: Record<string, unknown>[];
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
  /** Sends an artifact, or a chunk of one (`append`: its parts extend the artifact of the same id); renews the lease. */
  artifact(artifact: TaskArtifact, options?: { append?: boolean; lastChunk?: boolean }): Promise<void>;
  /**
   * Asks the submitter for more (a question, or none): the task waits, and the signal is aborted (stop, and return:
   * nothing more is reported). The answer hands the task back to this node, its messages in `task.history`.
   */
  askForInput(question?: TaskMessage): Promise<void>;
}

/** Runs one task; resolves with its result (a JSON object) or a TaskCompletion, or throws to fail it. */
export type TaskHandler = (
  task: ClaimedTask,
  context: TaskContext
) => Promise<Record<string, unknown> | TaskCompletion>;

export type TaskEvent = { task_id: string; type: string } & (
  { state: 'claimed' | 'done' | 'canceled' | 'lost' | 'input_required' } | { state: 'failed'; reason: string }
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
    let outcome: 'canceled' | 'lost' | 'input_required' | undefined;

    /** A request about the task while the handler works; a lost claim aborts the handler. */
    const send = async (path: string, body: Record<string, unknown>) => {
      const res = await http.request('POST', `/api/task/${id}/${path}`, {
        body,
        headers: this.options.authHeaders(),
        signal: stop
      });
      if (res.status === 409 || res.status === 404) {
        outcome ??= 'lost';
        abort.abort(outcome);
      } else if (res.status !== 200 && path !== 'progress')
        throw new Error(`the hub refused ${path}: ${res.status} ${res.body?.message ?? ''}`);
      return res;
    };
    const progress = async (note?: string) => {
      const line = note === undefined ? '' : oneLine(note, 500);
      const res = await send('progress', line ? { note: line } : {});
      if (res.status === 200 && res.body.canceled) {
        outcome ??= 'canceled';
        abort.abort(outcome);
      }
    };
    const artifact = async (artifact: TaskArtifact, options: { append?: boolean; lastChunk?: boolean } = {}) => {
      await send('artifact', { artifact, append: options.append ?? false, last_chunk: options.lastChunk ?? true });
    };
    const askForInput = async (question?: TaskMessage) => {
      const res = await send('input-required', question === undefined ? {} : { message: asMessage(question) });
      if (res.status === 200) {
        outcome ??= 'input_required';
        abort.abort(outcome);
      }
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
    let result: Record<string, unknown> | TaskCompletion | undefined;
    let failure: string | undefined;
    try {
      result = await this.options.handler(task, { signal: abort.signal, progress, artifact, askForInput });
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
        ? [`/api/task/${id}/complete`, completeBody(result)]
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

/** What `complete` is sent: a plain result, or a TaskCompletion's members (a string message as one text part). */
function completeBody(result: Record<string, unknown> | TaskCompletion | undefined): Record<string, unknown> {
  if (!(result instanceof TaskCompletion)) return { result: result ?? {} };
  const { message, ...rest } = result.outcome;
  return { ...rest, ...(message === undefined ? {} : { message: asMessage(message) }) };
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
