/**
 * A federation queue record as an A2A v1.0 Task, the one shape every A2A answer carries (SendMessage, GetTask,
 * ListTasks, CancelTask and the streams' updates, over HTTP+JSON and JSON-RPC alike). Queue states map to A2A task
 * states: queued SUBMITTED, claimed WORKING, input_required INPUT_REQUIRED, done COMPLETED, failed FAILED, canceled
 * CANCELED. The history is the submitter's first message (the payload), then the conversation (the node's questions
 * and the submitter's answers); the artifacts are those the node sent, then its result.
 */
import { z } from 'zod';
import type { TaskState } from '../../core/federation/vocabulary';
import type { TaskDocument } from '../../store/federation/tasks';
import { documentedMessage } from './a2a-message';

export const A2A_STATE: Record<TaskState, string> = {
  queued: 'TASK_STATE_SUBMITTED',
  claimed: 'TASK_STATE_WORKING',
  input_required: 'TASK_STATE_INPUT_REQUIRED',
  done: 'TASK_STATE_COMPLETED',
  failed: 'TASK_STATE_FAILED',
  canceled: 'TASK_STATE_CANCELED'
};

/** The A2A states a queue state stands for, and the queue state each stands for. */
export const A2A_STATES = [
  'TASK_STATE_SUBMITTED',
  'TASK_STATE_WORKING',
  'TASK_STATE_INPUT_REQUIRED',
  'TASK_STATE_COMPLETED',
  'TASK_STATE_FAILED',
  'TASK_STATE_CANCELED'
] as const;
export type A2aState = (typeof A2A_STATES)[number];
export const QUEUE_STATE = Object.fromEntries(Object.entries(A2A_STATE).map(([k, v]) => [v, k as TaskState]));
/** A2A v1.0's other task states (a2a.proto TaskState): valid in a ListTasks filter, which then matches no task. */
export const A2A_STATES_NEVER_HELD = ['TASK_STATE_REJECTED', 'TASK_STATE_AUTH_REQUIRED'] as const;

const FINAL: TaskState[] = ['done', 'failed', 'canceled'];
/** A final task changes no more: nothing to wait for, stream or cancel. */
export const isFinal = (t: TaskDocument) => FINAL.includes(t.state);
/** A task that waits for its submitter (interrupted, in A2A's words): a blocking send answers it as it is. */
export const isInterrupted = (t: TaskDocument) => t.state === 'input_required';

const agentText = (id: string, text: string) => ({ messageId: id, role: 'ROLE_AGENT', parts: [{ text }] });

/** The artifact updates a node sent (TaskDocument.artifact_updates_json), in order. */
export type ArtifactUpdate = {
  artifact: { artifactId: string; parts: unknown[] } & Record<string, unknown>;
  append: boolean;
  lastChunk: boolean;
};
export const artifactUpdates = (t: TaskDocument): ArtifactUpdate[] =>
  (t.artifact_updates_json ?? []).map((u) => JSON.parse(u) as ArtifactUpdate);

/** The artifacts the updates make: an update appends its parts to the artifact of the same id, or replaces it. */
function nodeArtifacts(t: TaskDocument) {
  const byId = new Map<string, ArtifactUpdate['artifact']>();
  for (const { artifact, append } of artifactUpdates(t)) {
    const held = byId.get(artifact.artifactId);
    byId.set(artifact.artifactId, append && held ? { ...held, parts: [...held.parts, ...artifact.parts] } : artifact);
  }
  return [...byId.values()];
}

/** The conversation as A2A Messages: the first message, then the node's questions and the submitter's answers. */
function historyOf(t: TaskDocument): Record<string, unknown>[] {
  const payload = messagePayload.safeParse(JSON.parse(t.payload_json));
  const first = payload.success ? [documentedMessage(payload.data.message)] : [];
  return [...first, ...(t.history_json ?? []).map((m) => documentedMessage(JSON.parse(m) as Record<string, unknown>))];
}

/** The node's Message answer (a direct reply), or null. */
export const replyOf = (t: TaskDocument): Record<string, unknown> | null =>
  t.reply_json ? documentedMessage(JSON.parse(t.reply_json) as Record<string, unknown>) : null;

const messagePayload = z.object({ message: z.record(z.string(), z.unknown()) });

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

/** What a Task answer holds: GetTask's and ListTasks' `historyLength`, and ListTasks' `includeArtifacts`. */
export type TaskView = { historyLength?: number; includeArtifacts?: boolean };

/**
 * A queue record as an A2A Task: state mapped, the node's result as the artifact, the message (its documented
 * members: ./a2a-message.ts) as history. `historyLength`: at most that many of the newest history messages (0:
 * none); absent, all of them. `includeArtifacts: false` leaves the `artifacts` member out (ListTasks' default).
 */
export function toA2aTask(t: TaskDocument, view: TaskView = {}) {
  const history = historyOf(t);
  const note = t.state === 'failed' ? t.error : t.state === 'claimed' ? t.progress : null;
  const last = history[history.length - 1];
  // Waiting for input: the node's question, when it asked one, is the status message (and the newest in history).
  const question = t.state === 'input_required' && last?.role === 'ROLE_AGENT' ? last : null;
  const statusMessage = question ?? replyOf(t) ?? (note ? agentText(`${t._id}-status-${t.attempts}`, note) : null);
  const result = resultArtifact(t);
  const n = view.historyLength;
  return {
    id: t._id,
    contextId: t.context_id ?? t._id,
    status: {
      state: A2A_STATE[t.state],
      timestamp: t.updated_at,
      ...(statusMessage ? { message: statusMessage } : {})
    },
    ...(view.includeArtifacts === false ? {} : { artifacts: [...nodeArtifacts(t), ...(result ? [result] : [])] }),
    history: n === undefined ? history : n === 0 ? [] : history.slice(-n),
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
