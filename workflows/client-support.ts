/**
 * What every workflow client module (`<flow>.client.ts`) shares: starting a workflow for a request (retrying
 * transient frontend failures; "already started" is left to the caller, since for most flows it means done) and
 * sending an update with a bounded wait. Client side only: never imported by workflow code.
 */
import { randomUUID } from 'node:crypto';
import {
  Client,
  isGrpcServiceError,
  ServiceError,
  WorkflowExecutionAlreadyStartedError,
  WorkflowHandle,
  WorkflowIdConflictPolicy,
  WorkflowIdReusePolicy,
  WorkflowStartOptions,
  WorkflowUpdateRPCTimeoutOrCancelledError
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
 *
 * Within that wait, an update the server aborted before the workflow saw it is sent again under the same update id:
 * the server answers WorkflowNotReady (FAILED_PRECONDITION) when the workflow task carrying the update failed or
 * timed out (a loaded worker), and UNAVAILABLE, ABORTED, RESOURCE_EXHAUSTED or DEADLINE_EXCEEDED when its registry
 * was cleared or it was busy. The update id makes the second send the first one where the workflow did see it (the
 * server deduplicates by id and answers the recorded outcome), so nothing is applied twice.
 */
export async function executeUpdateWithin<Ret, Args extends [unknown, ...unknown[]]>(
  handle: WorkflowHandle,
  update: UpdateDefinition<Ret, Args>,
  args: Args
): Promise<Ret> {
  const updateId = randomUUID();
  const deadline = Date.now() + UPDATE_WAIT_MS;
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, reject) => {
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
  });
  const send = async (): Promise<Ret> => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await handle.executeUpdate(update, { args, updateId });
      } catch (err) {
        const pause = Math.min(2000, 100 * 2 ** attempt);
        if (!updateNotSeen(err) || Date.now() + pause >= deadline) throw err;
        await new Promise((r) => setTimeout(r, pause));
      }
    }
  };
  try {
    return await Promise.race([send(), timedOut]);
  } finally {
    clearTimeout(timer);
  }
}

/** gRPC codes of an update the server gave up on before the workflow accepted it (see executeUpdateWithin). */
// DEADLINE_EXCEEDED 4, RESOURCE_EXHAUSTED 8, FAILED_PRECONDITION 9, ABORTED 10, UNAVAILABLE 14.
const UPDATE_RETRY_CODES = new Set([4, 8, 9, 10, 14]);

function updateNotSeen(err: unknown): boolean {
  if (err instanceof WorkflowUpdateRPCTimeoutOrCancelledError) return true;
  const cause = err instanceof ServiceError ? err.cause : err;
  return isGrpcServiceError(cause) && UPDATE_RETRY_CODES.has(cause.code);
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
