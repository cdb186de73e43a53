/**
 * The task-leases workflow's sweep: return lapsed tasks to the queue (or fail them after max_attempts) and report the
 * earliest lease left. Idempotent: every change is conditional on the lease it read (store/federation/tasks.ts).
 */
import type { Db } from 'mongodb';
import { TaskCounters } from '../../store/federation/task-counters';
import { TaskLists } from '../../store/federation/task-lists';
import { TaskStore } from '../../store/federation/tasks';
import type { LeaseSweepRequest, LeaseSweepResult } from '../../contracts/federation/task-lease.contract';

export function createTaskLeaseActivities(deps: { db: Db }) {
  // The worker process's one counter document (a TaskCounters per sweep would add a document per sweep).
  const counters = new TaskCounters(deps.db);
  const lists = new TaskLists(deps.db);
  return {
    async sweepTaskLeases(request: LeaseSweepRequest): Promise<LeaseSweepResult> {
      const tasks = new TaskStore(deps.db, { maxAttempts: request.max_attempts, counters, lists });
      const swept = await tasks.sweepLapsed(new Date());
      return { ...swept, next_expiry_ms: await tasks.nextLeaseExpiry() };
    }
  };
}
