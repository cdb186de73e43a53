/**
 * A federation queue record as an A2A v1.0 Task, the one shape every A2A answer carries (SendMessage, GetTask,
 * ListTasks, CancelTask and the streams' updates, over HTTP+JSON and JSON-RPC alike). Queue states map to A2A task
 * states: queued SUBMITTED, claimed WORKING, done COMPLETED, failed FAILED, canceled CANCELED (input-required never
 * applies: a task takes one message).
 */
import { z } from 'zod';
import type { TaskState } from '../../core/federation/vocabulary';
import type { TaskDocument } from '../../store/federation/tasks';

export const A2A_STATE: Record<TaskState, string> = {
  queued: 'TASK_STATE_SUBMITTED',
  claimed: 'TASK_STATE_WORKING',
  done: 'TASK_STATE_COMPLETED',
  failed: 'TASK_STATE_FAILED',
  canceled: 'TASK_STATE_CANCELED'
};

/** The A2A states a ListTasks may filter on, and the queue state each stands for. */
export const A2A_STATES = [
  'TASK_STATE_SUBMITTED',
  'TASK_STATE_WORKING',
  'TASK_STATE_COMPLETED',
  'TASK_STATE_FAILED',
  'TASK_STATE_CANCELED'
] as const;
export type A2aState = (typeof A2A_STATES)[number];
export const QUEUE_STATE = Object.fromEntries(Object.entries(A2A_STATE).map(([k, v]) => [v, k as TaskState]));

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

/** A queue record as an A2A Task: state mapped, the node's result as the artifact, the message as history. */
/**
 * A task as A2A answers it. `historyLength` (GetTask's): at most that many of the newest history messages (0: none);
 * absent, all of them.
 */
export function toA2aTask(t: TaskDocument, historyLength?: number) {
  const payload = messagePayload.safeParse(JSON.parse(t.payload_json));
  const message = payload.success ? payload.data.message : null;
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
    artifacts: artifact ? [artifact] : [],
    history: message && historyLength !== 0 ? [message] : [],
    metadata: {
      task_type: t.type,
      required_capabilities: t.required_capabilities,
      priority: t.priority,
      attempts: t.attempts,
      claimed_by: t.claimed_by
    }
  };
}
export type A2aTask = ReturnType<typeof toA2aTask>;
