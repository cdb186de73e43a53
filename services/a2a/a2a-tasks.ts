/**
 * The A2A binding's task operations on the federation queue (store/federation/tasks.ts), whichever binding carries
 * them (HTTP+JSON or JSON-RPC): a message becomes a task that a worker node claims; the caller waits for it, follows
 * it, lists, gets or cancels it. A caller sees only the tasks it sent: another caller's task is as good as missing.
 * Refusals are the A2A error reasons (the bindings give each its status or code); store failures are thrown.
 */
import { createHash } from 'node:crypto';
import { canonicalJson, type JsonValue } from '../../core/ledger/canonical-json';
import type { A2aConfig } from '../../core/config.node';
import type { TaskDocument, TaskStore } from '../../store/federation/tasks';
import { A2A_STATE, isFinal, QUEUE_STATE, toA2aTask, type TaskView } from './a2a-task';

/** The A2A errors a task operation ends in (the binding maps each to its HTTP status or JSON-RPC code). */
export type A2aRefusal =
  | 'TASK_NOT_FOUND'
  | 'TASK_NOT_CANCELABLE'
  | 'UNSUPPORTED_OPERATION'
  | 'CONTENT_TYPE_NOT_SUPPORTED'
  | 'PUSH_NOTIFICATION_NOT_SUPPORTED'
  | 'VERSION_NOT_SUPPORTED'
  | 'INVALID_PARAMS';

/** An operation's outcome: its value, or the A2A error it ends in. */
export type Outcome<T> = ({ ok: true } & T) | { ok: false; reason: A2aRefusal; message?: string };

/** The parts of an A2A Message the hub reads (the binding's schema validated them); the rest is kept as sent. */
export type A2aMessage = {
  messageId: string;
  contextId?: string;
  taskId?: string;
  parts: { mediaType?: string }[];
  metadata?: { required_capabilities?: string[]; task_type?: string; priority?: number };
};

/**
 * `status`: an A2A state to filter on (a state the queue never holds matches nothing); the SDKs' unset enum values
 * filter nothing. `statusTimestampAfter`: RFC 3339. `includeArtifacts`: the artifacts member, left out by default.
 */
export type ListTasksQuery = {
  pageSize: number;
  pageToken?: string;
  contextId?: string;
  status?: string;
  historyLength?: number;
  includeArtifacts?: boolean;
  statusTimestampAfter?: string;
};

/** The filter values that mean no filter (the SDKs' unset enum values). */
const NO_STATUS = ['TASK_STATE_UNSPECIFIED', 'UNRECOGNIZED'];

/** One event of a task's stream: a StreamResponse, or null when nothing changed (time for a keep-alive). */
export type StreamEvent = Record<string, unknown> | null;

const ACCEPTED_MEDIA = ['', 'text/plain', 'application/json'];
const POLL_MS = 300;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export type A2aTasks = ReturnType<typeof createA2aTasks>;

export function createA2aTasks({
  tasks,
  config
}: {
  tasks: TaskStore;
  config: Pick<A2aConfig, 'A2A_SEND_WAIT_S' | 'A2A_STREAM_MAX_S'>;
}) {
  const sendWaitMs = config.A2A_SEND_WAIT_S * 1000;
  const streamMaxMs = config.A2A_STREAM_MAX_S * 1000;

  /** The caller's task, or null. */
  const ownTask = async (submitter: string, id: string) => {
    const task = /^task_[a-f0-9]{24}$/.test(id) ? await tasks.find(id) : null;
    return task && task.submitted_by === submitter ? task : null;
  };

  /**
   * Queues a message as a task, or says why it cannot become one. A message naming a taskId continues that task: the
   * task must exist (and be the caller's), else TaskNotFound; the hub runs one message per task, so continuing one
   * is UnsupportedOperation.
   */
  const queue = async (submitter: string, message: A2aMessage): Promise<Outcome<{ task: TaskDocument }>> => {
    if (message.taskId) {
      const task = await ownTask(submitter, message.taskId);
      if (!task)
        return {
          ok: false,
          reason: 'TASK_NOT_FOUND',
          message: `No task ${message.taskId}: a message's taskId must name an existing task (leave it out for new work)`
        };
      return {
        ok: false,
        reason: 'UNSUPPORTED_OPERATION',
        message: isFinal(task)
          ? `The task is ${A2A_STATE[task.state]}: a final task takes no further message`
          : 'A task takes one message: send a new message (without taskId) for new work'
      };
    }
    if (message.parts.some((p) => !('text' in p || 'data' in p) || !ACCEPTED_MEDIA.includes(p.mediaType ?? '')))
      return { ok: false, reason: 'CONTENT_TYPE_NOT_SUPPORTED' };
    // Derived from the caller and messageId, so a retried send returns the first task.
    const id = `task_${createHash('sha256').update(`a2a\n${submitter}\n${message.messageId}`).digest('hex').slice(0, 24)}`;
    const { task } = await tasks.submit({
      _id: id,
      type: message.metadata?.task_type ?? 'a2a.message',
      payload_json: canonicalJson({ message } as unknown as JsonValue),
      required_capabilities: message.metadata?.required_capabilities ?? [],
      priority: message.metadata?.priority ?? 5,
      submitted_by: submitter,
      context_id: message.contextId ?? null
    });
    return { ok: true, task };
  };

  return {
    queue,

    /**
     * SendMessage: queues the message, then (unless returnImmediately) waits until the task is final, the client
     * leaves or A2A_SEND_WAIT_S passes. `watchClient` starts watching for the client leaving once the task is queued.
     */
    async send(
      submitter: string,
      request: { message: A2aMessage; configuration?: { returnImmediately?: boolean } },
      watchClient: () => () => boolean
    ): Promise<Outcome<{ task: ReturnType<typeof toA2aTask> }>> {
      const out = await queue(submitter, request.message);
      if (!out.ok) return out;
      let task = out.task;
      const until = Date.now() + sendWaitMs;
      const gone = watchClient();
      while (request.configuration?.returnImmediately !== true && !isFinal(task) && Date.now() < until && !gone()) {
        await sleep(POLL_MS);
        task = (await tasks.find(task._id)) ?? task;
      }
      return { ok: true, task: toA2aTask(task) };
    },

    /** GetTask. */
    async get(submitter: string, id: string): Promise<Outcome<{ task: TaskDocument }>> {
      const task = await ownTask(submitter, id);
      return task ? { ok: true, task } : { ok: false, reason: 'TASK_NOT_FOUND' };
    },

    /** SubscribeToTask: the task to follow, if it is not final yet. */
    async subscribe(submitter: string, id: string): Promise<Outcome<{ task: TaskDocument }>> {
      const task = await ownTask(submitter, id);
      if (!task) return { ok: false, reason: 'TASK_NOT_FOUND' };
      if (isFinal(task))
        return {
          ok: false,
          reason: 'UNSUPPORTED_OPERATION',
          message: `The task is ${A2A_STATE[task.state]}: a final task has no updates to subscribe to`
        };
      return { ok: true, task };
    },

    /** CancelTask: a queued or working task is canceled (its node hears it at its next progress call). */
    async cancel(submitter: string, id: string): Promise<Outcome<{ task: ReturnType<typeof toA2aTask> }>> {
      const task = await ownTask(submitter, id);
      if (!task) return { ok: false, reason: 'TASK_NOT_FOUND' };
      const out = await tasks.cancel(task._id);
      if (!out.canceled || !out.task)
        return {
          ok: false,
          reason: 'TASK_NOT_CANCELABLE',
          message: `The task is ${A2A_STATE[out.task?.state ?? task.state]}; only a submitted or working task can be canceled`
        };
      return { ok: true, task: toA2aTask(out.task) };
    },

    /**
     * ListTasks: the caller's tasks; the page token is the offset of the next page. Order (store/federation/tasks.ts
     * listBySubmitter): with a status, contextId or statusTimestampAfter filter, by status timestamp, the latest
     * first; without, newest submitted first (docs/a2a.md#a2a-binding: why).
     */
    async list(submitter: string, query: ListTasksQuery) {
      const { pageSize, pageToken, contextId, status, statusTimestampAfter } = query;
      const offset = pageToken ? Number(pageToken) : 0;
      const view: TaskView = { historyLength: query.historyLength, includeArtifacts: query.includeArtifacts === true };
      const state = status && !NO_STATUS.includes(status) ? QUEUE_STATE[status] : undefined;
      // A state the queue never holds (input-required, rejected, auth-required): no task has it.
      const page =
        status && !NO_STATUS.includes(status) && !state
          ? { total: 0, tasks: [] }
          : await tasks.listBySubmitter(
              submitter,
              {
                state,
                contextId,
                // Stored timestamps are toISOString()'s: compared as text, the bound must be written alike.
                updatedSince: statusTimestampAfter ? new Date(statusTimestampAfter).toISOString() : undefined
              },
              { limit: pageSize, offset }
            );
      const next = offset + page.tasks.length;
      return {
        tasks: page.tasks.map((t) => toA2aTask(t, view)),
        nextPageToken: next < page.total ? String(next) : '',
        pageSize,
        totalSize: page.total
      };
    },

    /**
     * A task's StreamResponses: { task } first, then an { artifactUpdate } (with the result) and a { statusUpdate }
     * at each change, until the task is final, `isOpen` turns false or A2A_STREAM_MAX_S passes (the client then
     * subscribes again). A failed read is reported to `onPollError` and tried again at the next poll.
     */
    async *follow(
      first: TaskDocument,
      isOpen: () => boolean,
      onPollError: (err: unknown) => void
    ): AsyncGenerator<StreamEvent> {
      yield { task: toA2aTask(first) };
      const keyOf = (t: TaskDocument) => `${t.state}/${t.attempts}/${t.progress ?? ''}`;
      let last = keyOf(first);
      let current = first;
      const started = Date.now();
      while (isOpen() && !isFinal(current) && Date.now() - started < streamMaxMs) {
        await sleep(POLL_MS);
        try {
          const next = await tasks.find(current._id);
          if (!next) break;
          current = next;
        } catch (err) {
          onPollError(err);
          continue;
        }
        const key = keyOf(current);
        if (key === last) {
          yield null;
          continue;
        }
        last = key;
        const a2a = toA2aTask(current);
        const artifact = a2a.artifacts?.[0];
        if (artifact) yield { artifactUpdate: { taskId: a2a.id, contextId: a2a.contextId, artifact, lastChunk: true } };
        // A2A v1.0's TaskStatusUpdateEvent has no `final`: the stream's end after a final state says it.
        yield { statusUpdate: { taskId: a2a.id, contextId: a2a.contextId, status: a2a.status } };
      }
    }
  };
}
