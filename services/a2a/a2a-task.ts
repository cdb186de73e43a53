/**
 * A federation queue record as an A2A v1.0 Task, the one shape every A2A answer carries (SendMessage, GetTask,
 * ListTasks, CancelTask and the streams' updates, over HTTP+JSON and JSON-RPC alike). Queue states map to A2A task
 * states: queued SUBMITTED, claimed WORKING, done COMPLETED, failed FAILED, canceled CANCELED (input-required never
 * applies: a task takes one message).
 */
import { z } from 'zod';
import type { TaskState } from '../../core/federation/vocabulary';
import type { TaskDocument } from '../../store/federation/tasks';
import { documentedMessage } from './a2a-message';

export const A2A_STATE: Record<TaskState, string> = {
  queued: 'TASK_STATE_SUBMITTED',
  claimed: 'TASK_STATE_WORKING',
  done: 'TASK_STATE_COMPLETED',
  failed: 'TASK_STATE_FAILED',
  canceled: 'TASK_STATE_CANCELED'
};

/** The A2A states a queue state stands for, and the queue state each stands for. */
export const A2A_STATES = [
  'TASK_STATE_SUBMITTED',
  'TASK_STATE_WORKING',
  'TASK_STATE_COMPLETED',
  'TASK_STATE_FAILED',
  'TASK_STATE_CANCELED'
] as const;
export type A2aState = (typeof A2A_STATES)[number];
export const QUEUE_STATE = Object.fromEntries(Object.entries(A2A_STATE).map(([k, v]) => [v, k as TaskState]));
/** A2A v1.0's other task states (a2a.proto TaskState): valid in a ListTasks filter, which then matches no task. */
export const A2A_STATES_NEVER_HELD = [
  'TASK_STATE_INPUT_REQUIRED',
  'TASK_STATE_REJECTED',
  'TASK_STATE_AUTH_REQUIRED'
] as const;

const FINAL: TaskState[] = ['done', 'failed', 'canceled'];
/** A final task changes no more: nothing to wait for, stream or cancel. */
export const isFinal = (t: TaskDocument) => FINAL.includes(t.state);

const agentText = (id: string, text: string) => ({ messageId: id, role: 'ROLE_AGENT', parts: [{ text }] });

function resultArtifact(t: TaskDocument) {
  if (t.state !== 'done' || t.result_json === null) return null;
  const result: unknown = JSON.parse(t.result_json);
  const text =
    result && typeof result === 'object' && 'text' in result && typeof result.text === 'string' ? result.text : null;
  return {
    artifactId: `${t._id}-result`,
    name: 'result',
    description: `The result node ${t.claimed_by} reported`,
    parts: [...(text === null ? [] : [{ text }]), { data: result, mediaType: 'application/json' }]
  };
}

const messagePayload = z.object({ message: z.record(z.string(), z.unknown()) });

/** What a Task answer holds: GetTask's and ListTasks' `historyLength`, and ListTasks' `includeArtifacts`. */
export type TaskView = { historyLength?: number; includeArtifacts?: boolean };

/**
 * A queue record as an A2A Task: state mapped, the node's result as the artifact, the message (its documented
 * members: ./a2a-message.ts) as history. `historyLength`: at most that many of the newest history messages (0:
 * none); absent, all of them. `includeArtifacts: false` leaves the `artifacts` member out (ListTasks' default).
 */
export function toA2aTask(t: TaskDocument, view: TaskView = {}) {
  const payload = messagePayload.safeParse(JSON.parse(t.payload_json));
  const message = payload.success ? documentedMessage(payload.data.message) : null;
  const note = t.state === 'failed' ? t.error : t.state === 'claimed' ? t.progress : null;
  const artifact = resultArtifact(t);
  return {
    id: t._id,
    contextId: t.context_id ?? t._id,
    status: {
      state: A2A_STATE[t.state],
      timestamp: t.updated_at,
      ...(note ? { message: agentText(`${t._id}-status-${t.attempts}`, note) } : {})
    },
    ...(view.includeArtifacts === false ? {} : { artifacts: artifact ? [artifact] : [] }),
    history: message && view.historyLength !== 0 ? [message] : [],
    // The queue's view of the task, named in the protocol's JSON convention (camelCase).
    metadata: {
      taskType: t.type,
      requiredCapabilities: t.required_capabilities,
      priority: t.priority,
      attempts: t.attempts,
      claimedBy: t.claimed_by
    }
  };
}
export type A2aTask = ReturnType<typeof toA2aTask>;
