/**
 * A node joins the federation (POST /a2a/register, api/routes/federation/register.ts): it gets the next hub-wide
 * node id, an API key (shown once; only its digest is stored) and its node/<node_id> lifecycle workflow, and is told
 * how to heartbeat and where the endpoint directory is. The unique seq index is what guarantees no two nodes share an
 * id (see NodeStore.insertWithNextSequence), so concurrent registrations never collide; a number lost to another API
 * process is retried with the next one inside the store, and a registration that cannot get one answers 503. The node
 * document is stored first, then its workflow started; if Temporal cannot be reached the document is removed again
 * (nothing half-registered).
 *
 * A registration may name the node's DID (`did`): a registered, unrevoked DID linked to no node yet. It is checked
 * before anything is stored (400 unknown or revoked, 409 linked to another node), linked once the node document exists
 * (a conditional update of the DID's record, store/deploy/registry.ts linkFreeDid, so a DID revoked or linked meanwhile
 * is refused the same way and the node removed again), and unlinked again if the workflow cannot be started. The link
 * is in the ledger through the node's registration event (its `did`, written by the lifecycle workflow's activity).
 * Registration is anonymous and a DID is no secret, so it can only link a DID that is free: moving a link is
 * did_register's (an arbitrator's) alone.
 */
import { type Client, WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { Config, FederationConfig, ServiceConfig, TemporalConfig } from '../../core/config.node';
import { hashSecret, newSecret } from '../../core/credentials.node';
import { AppError } from '../../core/errors';
import { formatNodeId, type RegistrationBody } from '../../core/federation/vocabulary';
import { startNodeLifecycle } from '../../workflows/federation/node-lifecycle.client';
import { type NodeLifecycleInput, nodeWorkflowId } from '../../contracts/federation/node-lifecycle.contract';
import type { NodeDocument } from '../../store/federation/node-document';
import type { NodeStore } from '../../store/federation/nodes';
import type { DidRegistryStore, RegistryEntry } from '../../store/deploy/registry';
import { isDuplicateKey } from '../../store/mongo';

const MAX_ID_SKIPS = 1000;

/** An endpoint of the directory, as the registration answer lists it. */
type DirectoryEntry = { method: string; path: string; group: string; auth: string; listener: string };

export type RegistrationConfig = Pick<Config, 'publicUrl' | 'hubPublicUrl'> &
  Pick<ServiceConfig, 'SERVICE_DID'> &
  Pick<TemporalConfig, 'TEMPORAL_TASK_QUEUE'> &
  Pick<
    FederationConfig,
    'NODE_REVIEW_REQUIRED' | 'NODE_OFFLINE_AFTER_S' | 'NODE_CACHE_TTL_MS' | 'NODE_WORKFLOW_HISTORY_LIMIT'
  >;

/** Why a DID cannot be linked to a new node (null: it can), as the error the registration answers. */
function didRefusal(did: string, entry: RegistryEntry | null): AppError | null {
  const field = (message: string) =>
    new AppError('invalid_request', `did: ${message}`, { fields: [{ field: 'body.did', message }] });
  if (!entry) return field(`${did} is not a registered DID (POST /admin/dids, or did_register)`);
  if ((entry.revoked_at ?? null) !== null) return field(`${did} was revoked`);
  if (entry.node_id) return new AppError('conflict', `DID ${did} is linked to another node (did_register moves links)`);
  return null;
}

export function createNodeRegistration({
  nodes,
  didRegistry,
  temporal,
  directory,
  config
}: {
  nodes: NodeStore;
  /** The DIDs a registration can link (its `did`). */
  didRegistry: Pick<DidRegistryStore, 'get' | 'linkFreeDid' | 'unlinkNode'>;
  temporal: Client;
  /** The endpoint directory the new node is shown. */
  directory: { entries(): DirectoryEntry[] };
  config: RegistrationConfig;
}) {
  return {
    /** Registers a node; `log` hears what could not be undone or started. */
    async register(body: RegistrationBody, log: { error(obj: object, msg: string): void }) {
      const apiKey = newSecret('nk_');
      const now = new Date().toISOString();
      const initialState: 'pending_review' | 'offline' = config.NODE_REVIEW_REQUIRED ? 'pending_review' : 'offline';
      const did = body.did;
      if (did) {
        const refusal = didRefusal(did, await didRegistry.get(did));
        if (refusal) throw refusal;
      }
      // A node id whose workflow already exists in Temporal (the database was reset while Temporal kept its
      // histories) is skipped: the node document is removed and the next number taken.
      let nodeId = '';
      for (let attempt = 1; !nodeId; attempt++) {
        const doc = await nodes
          .insertWithNextSequence((sequence): NodeDocument => ({
            _id: formatNodeId(body.brand.code, sequence),
            seq: sequence,
            name: body.name,
            brand: { code: body.brand.code, model_base: body.brand.model_base ?? null },
            instance: {
              os: body.instance?.os ?? null,
              cpu: body.instance?.cpu ?? null,
              memory_gb: body.instance?.memory_gb ?? null,
              gpu: body.instance?.gpu ?? null
            },
            capabilities: body.capabilities?.declared ?? [],
            api_key_hash: hashSecret(apiKey),
            state: initialState,
            created_at: now,
            state_changed_at: now,
            review: null
          }))
          .catch((err: unknown) => {
            // Left only if other API processes took this registration's number MAX_SEQUENCE_ATTEMPTS times in a row.
            if (isDuplicateKey(err)) {
              throw new AppError(
                'unavailable',
                'Too many concurrent registrations; nothing was kept, please retry',
                {},
                { 'Retry-After': '1' }
              );
            }
            throw err;
          });
        if (did && !(await didRegistry.linkFreeDid(did, doc._id, 'registration'))) {
          // Revoked or linked to another node since the check above: nothing of this registration is kept.
          void nodes.abandon([doc], (e) =>
            log.error({ err: e, nodeId: doc._id }, 'a node whose DID could not be linked could not be removed')
          );
          throw didRefusal(did, await didRegistry.get(did)) ?? new AppError('conflict', `DID ${did} changed; retry`);
        }
        const input: NodeLifecycleInput = {
          version: 1,
          node_id: doc._id,
          brand: body.brand.code,
          registered_at: now,
          offline_after_s: config.NODE_OFFLINE_AFTER_S,
          review_required: config.NODE_REVIEW_REQUIRED,
          offline_recheck_ms: config.NODE_CACHE_TTL_MS + 1000,
          history_limit: config.NODE_WORKFLOW_HISTORY_LIMIT,
          hub_did: config.SERVICE_DID,
          ...(did ? { did } : {})
        };
        try {
          await startNodeLifecycle(
            temporal,
            config.TEMPORAL_TASK_QUEUE,
            input,
            { name: body.name, registered_at: now },
            initialState
          );
          nodeId = doc._id;
        } catch (err) {
          // Nothing half-registered: without its workflow the node could never be reviewed or go online.
          if (did)
            await didRegistry
              .unlinkNode(did, doc._id)
              .catch((e: unknown) =>
                log.error({ err: e, nodeId: doc._id, did }, 'the DID of a registration undone could not be unlinked')
              );
          const removed = nodes.abandon([doc], (e) =>
            log.error({ err: e, nodeId: doc._id }, 'a node whose workflow could not be started could not be removed')
          );
          if (err instanceof WorkflowExecutionAlreadyStartedError && attempt < MAX_ID_SKIPS) {
            // The skipped number's document is gone before the answer (the database answers: it just took the
            // insert), so a caller counting nodes after it never sees two for one registration. (Temporal being
            // unreachable, below, is answered at once, the removal retrying behind.)
            await removed;
            continue;
          }
          log.error({ err, nodeId: doc._id }, 'node workflow could not be started; registration undone');
          throw err;
        }
      }

      const base = config.publicUrl;
      return {
        ok: true as const,
        node_id: nodeId,
        api_key: apiKey,
        state: initialState,
        workflow_id: nodeWorkflowId(nodeId),
        did: did ?? null,
        message: config.NODE_REVIEW_REQUIRED
          ? 'registered; keep the api_key (it is shown only once), send heartbeats, and wait for review'
          : 'registered; keep the api_key (it is shown only once) and send heartbeats',
        heartbeat: {
          url: `${base}/a2a/heartbeat`,
          headers: { 'X-External-Node': nodeId, 'X-External-Key': '<api_key>' },
          offline_after_s: config.NODE_OFFLINE_AFTER_S,
          recommended_interval_s: Math.max(1, Math.floor(config.NODE_OFFLINE_AFTER_S / 3))
        },
        endpoints: {
          full_directory_url: `${base}/a2a/endpoints`,
          summary_url: `${base}/a2a/endpoints/summary`,
          agent_card_url: `${base}/a2a/.well-known/agent.json`,
          entries: directory.entries().map((e) => ({
            method: e.method,
            path: e.path,
            group: e.group,
            auth: e.auth,
            url: `${e.listener === 'hub' ? config.hubPublicUrl : base}${e.path}`
          }))
        }
      };
    }
  };
}
