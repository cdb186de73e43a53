/**
 * Tasks for worker nodes, submitted on the hub listener (POST /a2a/task) and claimed later through the deployment
 * gateway's /api/task/assign. The record carries what a claim needs: required capabilities to match a node,
 * priority, a claim lease (claimed_by, lease_expires_at) that lapses back to queued, attempts, result or error.
 * The payload is kept as canonical JSON text (FerretDB cannot store every JSON object as a document).
 */
import { Collection, Db } from 'mongodb';
import type { TaskState } from '../../core/federation/vocabulary';

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
}

export class TaskStore {
  private readonly tasks: Collection<TaskDocument>;
  constructor(db: Db) {
    this.tasks = db.collection('tasks');
  }

  /** Inserts a queued task; with a duplicate id (an idempotent retry) returns the stored one instead. */
  async submit(doc: TaskDocument): Promise<{ task: TaskDocument; duplicate: boolean }> {
    try {
      await this.tasks.insertOne(doc);
      return { task: doc, duplicate: false };
    } catch (err) {
      if ((err as { code?: number }).code !== 11000) throw err;
      const existing = await this.tasks.findOne({ _id: doc._id });
      if (!existing) throw err;
      return { task: existing, duplicate: true };
    }
  }

  find(taskId: string): Promise<TaskDocument | null> {
    return this.tasks.findOne({ _id: taskId });
  }

  /** Counts per state (queued = depth, claimed = in flight). */
  async stats(): Promise<Record<TaskState, number> & { total: number; by_type: Record<string, number> }> {
    const docs = await this.tasks.find({}, { projection: { state: 1, type: 1 } }).toArray();
    const out = { queued: 0, claimed: 0, done: 0, failed: 0, total: docs.length, by_type: {} as Record<string, number> };
    for (const d of docs) {
      out[d.state] += 1;
      if (d.state === 'queued' || d.state === 'claimed') out.by_type[d.type] = (out.by_type[d.type] ?? 0) + 1;
    }
    return out;
  }
}
