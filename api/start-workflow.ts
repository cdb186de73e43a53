/**
 * Starts a workflow for a request, retrying transient failures of the Temporal frontend (a busy or restarting
 * server) for a few seconds before giving up. A duplicate id is not retried: it means the workflow exists.
 */
import { Client, WorkflowExecutionAlreadyStartedError, WorkflowStartOptions } from '@temporalio/client';
import type { Workflow } from '@temporalio/common';

const ATTEMPTS = 4;

export async function startWorkflowWithRetry<T extends Workflow>(client: Client, workflowType: string, options: WorkflowStartOptions<T>): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await client.workflow.start<T>(workflowType, options);
      return;
    } catch (err) {
      if (err instanceof WorkflowExecutionAlreadyStartedError || attempt >= ATTEMPTS) throw err;
      await new Promise((r) => setTimeout(r, 250 * 2 ** attempt));
    }
  }
}
