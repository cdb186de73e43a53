/**
 * What the API and operators share about `daemon-dag/<dag_id>`: one run per dispatch, its tasks in topological
 * order (independent ones in parallel up to DAEMON_MAX_PARALLEL), each checked against the current credential
 * state right before its model call, admitted by the breaker (daemon-breaker/<queue>), called on the models queue.
 * The state is read with the dagState query (GET /dags/<id>, GET /tasks/<dag_id>~<id>); in the Web UI:
 * `WorkflowType = "daemonDagWorkflow"`. Input carries the order root's SHA-256 only, never the secret.
 */
import { defineQuery } from '@temporalio/workflow';
import type { FlowTaskQueues } from '../task-queues';
import type { DagState, DagTask, TaskResult } from '../../core/daemon/dag';

export const daemonDagWorkflowId = (dagId: string): string => `daemon-dag/${dagId}`;
/** Identity checks, audit lines and the ledger mirror on core; model calls on models. */
export const DAEMON_DAG_TASK_QUEUES: FlowTaskQueues = { workflow: 'core', activities: ['core', 'models'] };

export interface DagInput {
  version: 1;
  dag_id: string;
  asset_id: string;
  order_root_sha256: string;
  order_root_version: number | null;
  tasks: DagTask[];
  /** Topological order (core/daemon/dag.ts validateDag). */
  order: string[];
  max_parallel: number;
  call_timeout_s: number;
  breaker_workflow_id: string;
  hub_did: string;
  submitted_at: string;
}

export interface DagView {
  dag_id: string;
  workflow_id: string;
  asset_id: string;
  status: DagState;
  tasks: TaskResult[];
  /** The audit chain root after this DAG's last audit line. */
  audit_root: string | null;
  submitted_at: string;
  finished_at: string | null;
  ledger_seq: number | null;
}

export const dagStateQuery = defineQuery<DagView>('daemonDagState');
