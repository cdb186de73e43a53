/**
 * The daemon's dispatch body and the DAG it describes (pure: shared by the route and the daemon-dag workflow).
 * A dispatch is one task (`model` + `prompt` | `messages`) or a DAG `{ tasks: [{ id, model, prompt | messages,
 * depends_on, max_tokens? }] }`. A child may quote a parent's output with `{{<parent id>.output}}` in its prompt or
 * message contents; only ids it depends on can be quoted. A cycle, an unknown dependency, a duplicate id or a quote
 * of a task that is not a dependency is refused before anything starts (validateDag). The body's zod schema is in
 * core/daemon/dispatch.ts (kept out of the workflow bundle); this module is pure and safe in the sandbox.
 */
export type { ChatMessage } from './dispatch';
import type { ChatMessage, DispatchBody, DagTaskInput } from './dispatch';

/** The global task id is `<dag_id>~<task id>` (GET /tasks/<task_id>). */
export const TASK_REF_PATTERN = /^([A-Za-z0-9_-]{1,64})~([A-Za-z0-9_-]{1,64})$/;
export const globalTaskId = (dagId: string, id: string): string => `${dagId}~${id}`;

/** One task as the workflow runs it: messages always (a prompt becomes one user message). */
export interface DagTask {
  id: string;
  model: string;
  messages: ChatMessage[];
  depends_on: string[];
  max_tokens: number | null;
}

export type DagProblem = { field: string; message: string };

const QUOTE = /\{\{([A-Za-z0-9_-]{1,64})\.output\}\}/g;

/** The tasks of a dispatch body, or the problems that make it unrunnable (each names its field). */
export function validateDag(body: DispatchBody): { tasks: DagTask[]; order: string[] } | { problems: DagProblem[] } {
  const raw: DagTaskInput[] =
    'tasks' in body
      ? body.tasks
      : [
          {
            id: body.id ?? 'task',
            model: body.model,
            prompt: body.prompt,
            messages: body.messages,
            max_tokens: body.max_tokens,
            depends_on: []
          }
        ];
  const problems: DagProblem[] = [];
  const ids = new Set<string>();
  raw.forEach((t, i) => {
    if (ids.has(t.id)) problems.push({ field: `tasks.${i}.id`, message: `task id ${t.id} is used twice` });
    ids.add(t.id);
  });
  const tasks: DagTask[] = raw.map((t, i) => {
    const where = 'tasks' in body ? `tasks.${i}` : '';
    const at = (f: string) => (where ? `${where}.${f}` : f);
    if ((t.prompt === undefined) === (t.messages === undefined))
      problems.push({ field: at('prompt'), message: 'give exactly one of prompt and messages' });
    t.depends_on.forEach((d, j) => {
      if (!ids.has(d)) problems.push({ field: at(`depends_on.${j}`), message: `unknown task ${d}` });
      if (d === t.id) problems.push({ field: at(`depends_on.${j}`), message: 'a task cannot depend on itself' });
    });
    const messages: ChatMessage[] = t.messages ?? (t.prompt !== undefined ? [{ role: 'user', content: t.prompt }] : []);
    for (const m of messages) {
      for (const q of m.content.matchAll(QUOTE)) {
        if (!t.depends_on.includes(q[1]!))
          problems.push({
            field: at(t.prompt !== undefined ? 'prompt' : 'messages'),
            message: `quotes {{${q[1]}.output}} but does not depend on ${q[1]}`
          });
      }
    }
    return {
      id: t.id,
      model: t.model,
      messages,
      depends_on: [...new Set(t.depends_on)],
      max_tokens: t.max_tokens ?? null
    };
  });
  if (problems.length) return { problems };
  const order = topologicalOrder(tasks);
  if (!order) return { problems: [{ field: 'tasks', message: 'the dependencies form a cycle' }] };
  return { tasks, order };
}

/** Kahn's algorithm, stable by declaration order; null when there is a cycle. */
export function topologicalOrder(tasks: Pick<DagTask, 'id' | 'depends_on'>[]): string[] | null {
  const pending = new Map(tasks.map((t) => [t.id, new Set(t.depends_on)]));
  const order: string[] = [];
  while (pending.size) {
    const ready = [...pending.entries()]
      .filter(([, deps]) => [...deps].every((d) => order.includes(d)))
      .map(([id]) => id);
    if (!ready.length) return null;
    for (const id of ready) {
      order.push(id);
      pending.delete(id);
    }
  }
  return order;
}

/** A task's messages with each `{{<parent>.output}}` replaced by that parent's output. */
export function resolveQuotes(messages: ChatMessage[], outputs: Record<string, string>): ChatMessage[] {
  return messages.map((m) => ({ ...m, content: m.content.replace(QUOTE, (all, id: string) => outputs[id] ?? all) }));
}

/** Task states (docs/daemon.md#dispatch). */
export const TASK_STATES = ['queued', 'running', 'paused', 'DONE', 'failed', 'skipped', 'rejected'] as const;
export type TaskState = (typeof TASK_STATES)[number];
export const DAG_STATES = ['running', 'DONE', 'failed', 'rejected'] as const;
export type DagState = (typeof DAG_STATES)[number];

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export interface TaskResult {
  task_id: string;
  id: string;
  model: string;
  depends_on: string[];
  status: TaskState;
  /** The produced text (null until DONE). */
  output: string | null;
  /** Output ownership: SHA-256 (hex) of the produced text. */
  output_sha256: string | null;
  usage: Usage | null;
  cost: number | null;
  /** The audit chain's root (hash of its last line) after this task's last audit line. */
  audit_root: string | null;
  error: string | null;
  started_at: string | null;
  finished_at: string | null;
}
