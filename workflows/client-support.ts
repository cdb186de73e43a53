/**
 * What every workflow client module (`<flow>.client.ts`) shares: starting a workflow for a request (retrying
 * transient frontend failures; "already started" is left to the caller, since for most flows it means done) and
 * sending an update with a bounded wait. Client side only: never imported by workflow code.
 */
import {
  Client,
  WorkflowExecutionAlreadyStartedError,
  WorkflowHandle,
  WorkflowIdConflictPolicy,
  WorkflowIdReusePolicy,
  WorkflowStartOptions
} from '@temporalio/client';
import type { UpdateDefinition, Workflow } from '@temporalio/common';
import { AppError } from '../core/errors';

const START_ATTEMPTS = 4;
const UPDATE_WAIT_MS = 15_000;

/** Starts a workflow, retrying a busy or restarting frontend for a few seconds. A duplicate id is not retried. */
export async function startWorkflowWithRetry<T extends Workflow>(
  client: Client,
  workflowType: string,
  options: WorkflowStartOptions<T>
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await client.workflow.start<T>(workflowType, options);
      return;
    } catch (err) {
      if (err instanceof WorkflowExecutionAlreadyStartedError || attempt >= START_ATTEMPTS) throw err;
      await new Promise((r) => setTimeout(r, 250 * 2 ** attempt));
    }
  }
}

/**
 * Sends a workflow update and waits at most UPDATE_WAIT_MS for its result. No answer in time is 503 (no worker is
 * polling, or it is busy): the caller may retry, since the update was not accepted. A refused update (validator or
 * handler failure) and a closed workflow are left to the caller to map.
 */
export async function executeUpdateWithin<Ret, Args extends [unknown, ...unknown[]]>(
  handle: WorkflowHandle,
  update: UpdateDefinition<Ret, Args>,
  args: Args
): Promise<Ret> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      handle.executeUpdate(update, { args }),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () =>
            reject(
              new AppError(
                'unavailable',
                `${handle.workflowId} did not answer within ${UPDATE_WAIT_MS / 1000} s (is a worker running?); retry`,
                {},
                { 'Retry-After': '5' }
              )
            ),
          UPDATE_WAIT_MS
        );
      })
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Resolves with `promise`'s value, or null once `ms` have passed. */
export async function within<T>(ms: number, promise: Promise<T>): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([promise, new Promise<null>((r) => (timer = setTimeout(() => r(null), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Starts a workflow whose id is a lock (one run at a time under that id; a new run once the last has closed): a
 * request while a run is open is 409 `conflict` with `conflictMessage` and `Retry-After: retryAfterS`.
 */
export async function startLocked<T extends Workflow>(
  client: Client,
  workflowType: string,
  options: Omit<WorkflowStartOptions<T>, 'workflowIdReusePolicy' | 'workflowIdConflictPolicy'>,
  conflict: { message: string; retryAfterS: number }
): Promise<void> {
  try {
    await startWorkflowWithRetry<T>(client, workflowType, {
      ...options,
      workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.FAIL
    } as WorkflowStartOptions<T>);
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) {
      throw new AppError(
        'conflict',
        conflict.message,
        { workflow_id: options.workflowId },
        { 'Retry-After': String(conflict.retryAfterS) }
      );
    }
    throw err;
  }
}

/** A run's result, or 504 `timeout` once `ms` have passed (the run goes on; the operator finds it in the UI). */
export async function resultWithin<T extends Workflow>(
  client: Client,
  workflowId: string,
  ms: number
): Promise<Awaited<ReturnType<T>>> {
  const result = await within(ms, client.workflow.getHandle<T>(workflowId).result());
  if (result === null)
    throw new AppError(
      'timeout',
      `${workflowId} has not finished within ${ms / 1000} s; it goes on (see the Temporal UI)`,
      { workflow_id: workflowId }
    );
  return result as Awaited<ReturnType<T>>;
}
