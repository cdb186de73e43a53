/**
 * Dispatching a DAG on the local daemon (POST /dispatch) and reading it back (GET /dags/<id>, GET /tasks/<id>).
 * Before anything starts, a cycle, an unknown dependency or a bad quote is refused (400) and a model outside the
 * free-tier whitelist is refused (403, with a `rejected` audit line); then an `admitted` audit line is written and
 * the DAG runs as the workflow daemon-dag/<dag_id>, behind the breaker daemon-breaker/<queue>. An asset reads only
 * the DAGs it dispatched.
 */
import { randomBytes } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { Config, DaemonConfig, ServiceConfig, TemporalConfig } from '../../core/config.node';
import type { ProviderCatalog } from '../../core/chat/providers';
import { auditChainFor, sha256Hex } from '../../core/daemon/audit.node';
import { TASK_REF_PATTERN, validateDag } from '../../core/daemon/dag';
import type { DispatchBody } from '../../core/daemon/dispatch';
import { daemonModelWhitelist, modelRefusal } from '../../core/daemon/models';
import { canonicalJson } from '../../core/ledger/canonical-json';
import { AppError, notFound } from '../../core/errors';
import { orderRootFacts } from '../../store/daemon/assets';
import { ensureBreaker, readDag, startDag, waitDag } from '../../workflows/daemon/dag.client';
import type { DagView } from '../../contracts/daemon/dag.contract';

/** How long POST /dispatch waits for the outcome before answering 202 (the DAG goes on). */
const DISPATCH_WAIT_MS = 120_000;

export interface DagDispatchDeps {
  config: Pick<
    DaemonConfig,
    | 'DAEMON_MODEL_WHITELIST'
    | 'DAEMON_BREAKER_THRESHOLD'
    | 'DAEMON_BREAKER_COOLDOWN_S'
    | 'DAEMON_MAX_PARALLEL'
    | 'DAEMON_CALL_TIMEOUT_S'
  > &
    Pick<ServiceConfig, 'SERVICE_DID'> &
    Pick<TemporalConfig, 'TEMPORAL_TASK_QUEUE'> &
    Pick<Config, 'dataDir'>;
  temporal: Client;
  catalog: ProviderCatalog;
}

const withUrl = (v: DagView) => ({ ok: true as const, ...v, status_url: `/dags/${v.dag_id}` });

export function createDagDispatch({ config, temporal, catalog }: DagDispatchDeps) {
  const whitelist = daemonModelWhitelist(catalog, config.DAEMON_MODEL_WHITELIST);
  const chain = auditChainFor(config.dataDir);
  const coreQueue = config.TEMPORAL_TASK_QUEUE;

  /**
   * Admits and starts `body` for `assetId` (its X-Order-Root as presented); with `wait`, waits up to 120 s for the
   * outcome. `accepted` when it runs on (queued: not waited for; running: not finished in time).
   */
  async function dispatch(assetId: string, orderRoot: string | undefined, body: DispatchBody) {
    const dag = validateDag(body);
    if ('problems' in dag)
      throw new AppError('invalid_request', `The DAG cannot run: ${dag.problems.map((p) => p.message).join('; ')}`, {
        fields: dag.problems
      });
    const dagId = body.dag_id ?? `dag_${randomBytes(8).toString('hex')}`;
    for (const t of dag.tasks) {
      const refusal = modelRefusal(catalog, whitelist, t.model);
      if (refusal) {
        await chain.append({
          event: 'rejected',
          stage: 'whitelist',
          asset_id: assetId,
          dag_id: dagId,
          task_id: t.id,
          model: t.model,
          reason: refusal
        });
        throw new AppError('forbidden', refusal, { model: t.model });
      }
    }
    const root = orderRootFacts(orderRoot);
    const breakerId = await ensureBreaker(temporal, coreQueue, {
      threshold: config.DAEMON_BREAKER_THRESHOLD,
      cooldown_ms: config.DAEMON_BREAKER_COOLDOWN_S * 1000
    });
    const head = await chain.append({
      event: 'admitted',
      asset_id: assetId,
      dag_id: dagId,
      tasks: dag.order.join(','),
      dag_sha256: sha256Hex(canonicalJson(dag.tasks))
    });
    const workflowId = await startDag(temporal, coreQueue, {
      version: 1,
      dag_id: dagId,
      asset_id: assetId,
      order_root_sha256: root.hash!,
      order_root_version: root.version,
      tasks: dag.tasks,
      order: dag.order,
      max_parallel: config.DAEMON_MAX_PARALLEL,
      call_timeout_s: config.DAEMON_CALL_TIMEOUT_S,
      breaker_workflow_id: breakerId,
      hub_did: config.SERVICE_DID,
      submitted_at: new Date().toISOString()
    });
    const accepted = (status: 'queued' | 'running') => ({
      accepted: {
        ok: true as const,
        dag_id: dagId,
        workflow_id: workflowId,
        status,
        status_url: `/dags/${dagId}`,
        audit_root: head.hash
      }
    });
    if (!body.wait) return accepted('queued');
    const outcome = await waitDag(temporal, dagId, DISPATCH_WAIT_MS);
    if (!outcome) return accepted('running');
    // A single-task dispatch also answers its task's result at the top level (docs/daemon.md#dispatch).
    const single = 'tasks' in body ? null : outcome.tasks[0]!;
    const top = single
      ? {
          task_id: single.task_id,
          output: single.output,
          output_sha256: single.output_sha256,
          usage: single.usage,
          cost: single.cost
        }
      : {};
    return { finished: { ...withUrl(outcome), ...top } };
  }

  const own = async (dagId: string, assetId: string): Promise<DagView> => {
    const view = await readDag(temporal, dagId);
    if (!view || view.asset_id !== assetId) throw notFound(`No DAG ${dagId} dispatched by this asset`);
    return view;
  };

  const dagOf = async (dagId: string, assetId: string) => withUrl(await own(dagId, assetId));

  /** One task, by its global id <dag_id>~<id>. */
  async function taskOf(taskRef: string, assetId: string) {
    const [, dagId, id] = TASK_REF_PATTERN.exec(taskRef)!;
    const view = await own(dagId!, assetId);
    const task = view.tasks.find((t) => t.id === id);
    if (!task) throw notFound(`No task ${id} in DAG ${dagId}`);
    return { ok: true as const, dag_id: view.dag_id, ...task };
  }

  return { dispatch, dagOf, taskOf };
}
