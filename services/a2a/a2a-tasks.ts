/**
 * The A2A binding's task operations on the federation queue (store/federation/tasks.ts), whichever binding carries
 * them (HTTP+JSON or JSON-RPC): a message becomes a task that a worker node claims; the caller waits for it, follows
 * it, lists, gets or cancels it. A caller sees only the tasks it sent: another caller's task is as good as missing.
 * Refusals are the A2A error reasons (the bindings give each its status or code); store failures are thrown.
 */
import { createHash, randomBytes } from 'node:crypto';
import { canonicalJson, type JsonValue } from '../../core/ledger/canonical-json';
import type { A2aConfig } from '../../core/config.node';
import type { TaskDocument, TaskStore } from '../../store/federation/tasks';
import { documentedMessage } from './a2a-message';
import {
  A2A_STATE,
  artifactUpdates,
  isFinal,
  isInterrupted,
  QUEUE_STATE,
  replyOf,
  toA2aTask,
  type TaskView
} from './a2a-task';

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
  config: Pick<A2aConfig, 'A2A_SEND_WAIT_S' | 'A2A_STREAM_MAX_S' | 'TASK_LEASE_S'>;
}) {
  const sendWaitMs = config.A2A_SEND_WAIT_S * 1000;
  const leaseMs = config.TASK_LEASE_S * 1000;
  const streamMaxMs = config.A2A_STREAM_MAX_S * 1000;

  /** The caller's task, or null. */
  const ownTask = async (submitter: string, id: string) => {
    const task = /^task_[a-f0-9]{24}$/.test(id) ? await tasks.find(id) : null;
    return task && task.submitted_by === submitter ? task : null;
  };

  /**
   * Queues a message as a task, or says why it cannot become one. A message naming a taskId answers that task, which
   * must be the caller's (else TaskNotFound) and waiting for input (a final or working task takes no message:
   * UnsupportedOperation), in the task's context (another contextId: InvalidParams): it is appended to the task's
   * history and the task handed back to its node. A new task's id is random, or derived from the caller and an
   * Idempotency-Key, so that a retried send with the key returns the first task (a messageId is not a retry key:
   * clients reuse them).
   */
  const queue = async (
    submitter: string,
    message: A2aMessage,
    idempotencyKey?: string
  ): Promise<Outcome<{ task: TaskDocument }>> => {
    if (message.parts.some((p) => !('text' in p || 'data' in p) || !ACCEPTED_MEDIA.includes(p.mediaType ?? '')))
      return { ok: false, reason: 'CONTENT_TYPE_NOT_SUPPORTED' };
    if (message.taskId) {
      const task = await ownTask(submitter, message.taskId);
      if (!task)
        return {
          ok: false,
          reason: 'TASK_NOT_FOUND',
          message: `No task ${message.taskId}: a message's taskId must name an existing task (leave it out for new work)`
        };
      const context = task.context_id ?? task._id;
      if (message.contextId !== undefined && message.contextId !== context)
        return {
          ok: false,
          reason: 'INVALID_PARAMS',
          message: `Task ${task._id} is in context ${context}, not ${message.contextId}`
        };
      const answer = { ...documentedMessage(message as unknown as Record<string, unknown>), contextId: context };
      const resumed =
        task.state === 'input_required'
          ? await tasks.resume(task._id, canonicalJson(answer as JsonValue), leaseMs)
          : null;
      if (!resumed)
        return {
          ok: false,
          reason: 'UNSUPPORTED_OPERATION',
          message: isFinal(task)
            ? `The task is ${A2A_STATE[task.state]}: a final task takes no further message`
            : `The task is ${A2A_STATE[task.state]}: a task takes a further message only while it waits for input`
        };
      return { ok: true, task: resumed };
    }
    const id = idempotencyKey
      ? `task_${createHash('sha256').update(`a2a\n${submitter}\n${idempotencyKey}`).digest('hex').slice(0, 24)}`
      : `task_${randomBytes(12).toString('hex')}`;
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

  /** What a send answers: the task, or the node's Message when it answered with one. */
  const answerOf = (task: TaskDocument, view: TaskView) => {
    const reply = task.state === 'done' ? replyOf(task) : null;
    type AgentMessage = { messageId: string; role: string; parts: Record<string, unknown>[] };
    return reply ? { message: reply as AgentMessage } : { task: toA2aTask(task, view) };
  };

  return {
    queue,

    /**
     * SendMessage: queues the message (or answers its task), then (unless returnImmediately) waits until the task is
     * final or waits for input, the client leaves or A2A_SEND_WAIT_S passes; answers the task, or the node's Message
     * when it answered with one. `watchClient` starts watching for the client leaving once the task is queued.
     */
    async send(
      submitter: string,
      request: { message: A2aMessage; configuration?: { returnImmediately?: boolean; historyLength?: number } },
      watchClient: () => () => boolean,
      idempotencyKey?: string
    ): Promise<Outcome<{ answer: ReturnType<typeof answerOf> }>> {
      const out = await queue(submitter, request.message, idempotencyKey);
      if (!out.ok) return out;
      let task = out.task;
      const until = Date.now() + sendWaitMs;
      const gone = watchClient();
      const settled = (t: TaskDocument) => isFinal(t) || isInterrupted(t);
      while (request.configuration?.returnImmediately !== true && !settled(task) && Date.now() < until && !gone()) {
        await sleep(POLL_MS);
        task = (await tasks.find(task._id)) ?? task;
      }
      return { ok: true, answer: answerOf(task, { historyLength: request.configuration?.historyLength }) };
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

    /**
     * CancelTask: a queued, working or input-required task is canceled (a working task's node hears it at its next
     * progress call).
     */
    async cancel(submitter: string, id: string): Promise<Outcome<{ task: ReturnType<typeof toA2aTask> }>> {
      const task = await ownTask(submitter, id);
      if (!task) return { ok: false, reason: 'TASK_NOT_FOUND' };
      const out = await tasks.cancel(task._id);
      if (!out.canceled || !out.task)
        return {
          ok: false,
          reason: 'TASK_NOT_CANCELABLE',
          message: `The task is ${A2A_STATE[out.task?.state ?? task.state]}; only a task not final yet can be canceled`
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
     * A task's StreamResponses: { task } first, then each artifact update the node sends as an { artifactUpdate }
     * (its result last, when it reports one) and a { statusUpdate } at each change, until the task is final (or,
     * with `untilInterrupted`, a SendStreamingMessage's stream, waits for input), `isOpen` turns false or
     * A2A_STREAM_MAX_S passes (the client then subscribes again). A failed read is reported to `onPollError` and
     * tried again at the next poll.
     */
    async *follow(
      first: TaskDocument,
      isOpen: () => boolean,
      onPollError: (err: unknown) => void,
      untilInterrupted = false
    ): AsyncGenerator<StreamEvent> {
      yield { task: toA2aTask(first) };
      const keyOf = (t: TaskDocument) =>
        `${t.state}/${t.attempts}/${t.progress ?? ''}/${t.history_json?.length ?? 0}/${t.resumed ? 1 : 0}`;
      let last = keyOf(first);
      let sent = first.artifact_updates_json?.length ?? 0;
      let current = first;
      const started = Date.now();
      const ended = (t: TaskDocument) => isFinal(t) || (untilInterrupted && isInterrupted(t));
      while (isOpen() && !ended(current) && Date.now() - started < streamMaxMs) {
        await sleep(POLL_MS);
        try {
          const next = await tasks.find(current._id);
          if (!next) break;
          current = next;
        } catch (err) {
          onPollError(err);
          continue;
        }
        const ids = { taskId: current._id, contextId: current.context_id ?? current._id };
        const updates = artifactUpdates(current);
        for (const u of updates.slice(sent)) yield { artifactUpdate: { ...ids, ...u } };
        const fresh = updates.length > sent;
        sent = updates.length;
        const key = keyOf(current);
        if (key === last) {
          if (!fresh) yield null;
          continue;
        }
        last = key;
        const a2a = toA2aTask(current);
        const result = a2a.artifacts?.find((a) => a.artifactId === `${current._id}-result`);
        if (result) yield { artifactUpdate: { ...ids, artifact: result, lastChunk: true } };
        // A2A v1.0's TaskStatusUpdateEvent has no `final`: the stream's end after a final state says it.
        yield { statusUpdate: { ...ids, status: a2a.status } };
      }
    }
  };
}
