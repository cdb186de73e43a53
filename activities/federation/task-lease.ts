/**
 * The task-leases workflow's sweep: return lapsed tasks to the queue (or fail them after max_attempts) and report the
 * earliest lease left. Idempotent: every change is conditional on the lease it read (store/federation/tasks.ts).
 */
import type { Db } from 'mongodb';
import { TaskStore } from '../../store/federation/tasks';
import type { LeaseSweepRequest, LeaseSweepResult } from '../../contracts/federation/task-lease.contract';

export function createTaskLeaseActivities(deps: { db: Db }) {
  return {
    async sweepTaskLeases(request: LeaseSweepRequest): Promise<LeaseSweepResult> {
      const tasks = new TaskStore(deps.db, { maxAttempts: request.max_attempts });
      const swept = await tasks.sweepLapsed(new Date());
      return { ...swept, next_expiry_ms: await tasks.nextLeaseExpiry() };
    }
  };
}
