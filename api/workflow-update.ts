/**
 * Sends a workflow update for a request and waits at most UPDATE_WAIT_MS for its result. No answer in time gives
 * 503 (no worker is polling, or it is busy): the caller may retry, since the update was not accepted.
 * A refused update (validator or handler failure) and a closed workflow are left to the caller to map.
 */
import { WorkflowHandle } from '@temporalio/client';
import type { UpdateDefinition } from '@temporalio/common';
import { AppError } from '../core/errors';

const UPDATE_WAIT_MS = 15_000;

export async function executeUpdateWithin<Ret, Args extends [unknown, ...unknown[]]>(handle: WorkflowHandle, update: UpdateDefinition<Ret, Args>, args: Args): Promise<Ret> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      handle.executeUpdate(update, { args }),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new AppError('unavailable', `${handle.workflowId} did not answer within ${UPDATE_WAIT_MS / 1000} s (is a worker running?); retry`)), UPDATE_WAIT_MS);
      })
    ]);
  } finally {
    clearTimeout(timer);
  }
}
