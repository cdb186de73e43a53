/** A task as stored (collection `tasks`): store/federation/tasks.ts writes it, task-transitions.ts changes it. */
import type { TaskState } from '../../core/federation/vocabulary';

/** What a submitter decides about a new task; everything else starts at its queued value. */
export type NewTask = Pick<
  TaskDocument,
  '_id' | 'type' | 'payload_json' | 'required_capabilities' | 'priority' | 'submitted_by' | 'context_id'
>;

export interface TaskDocument {
  _id: string; // task id
  type: string;
  payload_json: string;
  required_capabilities: string[];
  priority: number;
  state: TaskState;
  submitted_by: string;
  created_at: string;
  updated_at: string;
  claimed_by: string | null;
  lease_expires_at: string | null;
  attempts: number;
  result_json: string | null;
  error: string | null;
  /** Set by each claim; a node's complete/fail/progress must come from the current claim's node. */
  claim_id?: string | null;
  /** When the current (or last) claim began, and when the task reached done/failed/canceled. */
  claimed_at?: string | null;
  finished_at?: string | null;
  /** The last progress note a node sent (short text). */
  progress?: string | null;
  /** A2A: the context of the message the task came in as (its payload is { message }). */
  context_id?: string | null;
  /**
   * The conversation after the first message (which is in the payload), oldest first, each an A2A Message as
   * canonical JSON: the node's questions (input_required) and the submitter's answers. Absent: none yet.
   */
  history_json?: string[];
  /**
   * The artifacts a node sent while working, oldest first, each one update as canonical JSON:
   * `{ artifact, append, lastChunk }` (A2A's TaskArtifactUpdateEvent without the ids). Absent: none.
   */
  artifact_updates_json?: string[];
  /** The node's answer as a Message instead of a result (A2A's direct Message reply), canonical JSON. */
  reply_json?: string | null;
  /** A task an answer handed back to its node, not yet picked up by that node's next claim. */
  resumed?: boolean;
  /** Listed and counted from its submit (absent on tasks stored before the task reads: task-reads-build.ts). */
  tracked?: boolean;
  /** How many changes the task has had since its submit (absent until the first): task-transitions.ts. */
  rev?: number;
}
