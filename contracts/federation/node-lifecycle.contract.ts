/**
 * What the API, operators and the node/<node_id> workflow share: id scheme, input, signal, update, query, status.
 * Operators can look a node up in the Web UI (search attributes NodeId, Brand, NodeState) or query it:
 *   temporal workflow query --workflow-id node/ext-custom-000001 --type nodeStatus
 * and review from the CLI (the same update the review endpoints send):
 *   temporal workflow update execute --workflow-id node/ext-custom-000001 --name review \
 *     --input '{"decision":"approve","reviewer":"alice","reason":"checked"}'
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { FlowTaskQueues } from '../task-queues';
import type { NodeState } from '../../core/federation/vocabulary';

export const nodeWorkflowId = (nodeId: string): string => `node/${nodeId}`;

/** Task queues (contracts/task-queues.ts): the workflow and its activities (MongoDB only) run on the core queue. */
export const NODE_LIFECYCLE_TASK_QUEUES: FlowTaskQueues = { workflow: 'core', activities: ['core'] };

export interface NodeLifecycleInput {
  version: 1;
  node_id: string;
  brand: string;
  registered_at: string;
  /** No heartbeat for this long makes an online node offline (NODE_OFFLINE_AFTER_S). */
  offline_after_s: number;
  /** Whether new nodes wait for review (NODE_REVIEW_REQUIRED); if not, they start offline until a heartbeat. */
  review_required: boolean;
  /**
   * After going offline, look at presence once more after this long: an API process whose cached view of the node
   * still said "online" does not signal, so a heartbeat in that window is picked up here.
   */
  offline_recheck_ms: number;
  /** Continue as new once the history has this many events (keeps histories bounded). */
  history_limit: number;
  hub_did: string;
  /** The DID the registration linked to the node (absent: none), recorded with the registration's ledger event. */
  did?: string;
  /** State carried over by continue-as-new. */
  carried?: NodeCarriedState;
}

export interface NodeCarriedState {
  state: NodeState;
  state_since: string;
  last_seen_ms: number | null;
  transitions: number;
  runs: number;
  review: NodeStatus['review'];
  /** The newest liveness transition mirrored (livenessChanged); absent in runs before it. */
  liveness_seq?: number;
}

export interface ReviewRequest {
  decision: 'approve' | 'reject';
  reviewer: string;
  reason: string;
}

export interface NodeStatus {
  node_id: string;
  state: NodeState;
  state_since: string;
  last_seen_at: string | null;
  transitions: number;
  /** How many times the workflow continued as new (history kept bounded). */
  runs: number;
  review: { decision: 'approved' | 'rejected'; reviewer: string; reason: string; at: string } | null;
}

/** What the workflow's memo holds (written at start by the client module). */
export type NodeLifecycleMemo = {
  name: string;
  registered_at: string;
};

/** Sent by the API when a heartbeat arrives for a node it believes is not online (and by the sweeper, see below). */
export const heartbeatSignal = defineSignal<[{ seen_at_ms: number }]>('heartbeat');
/**
 * Sent by the presence sweeper (node-sweeper/<group>) when the node's presence shows no heartbeat for
 * NODE_OFFLINE_AFTER_S + PRESENCE_GRACE_MS: the workflow then reads the node's presence shard itself (a read
 * started no sooner than `swept_at_ms`) and goes offline only if that read still shows the silence. A late signal
 * can therefore never make a node offline that beat in time.
 */
export interface PresenceLapse {
  /** The newest heartbeat the sweeper saw (null: none in presence). */
  seen_at_ms: number | null;
  /** When the sweeper's read of the shard started. */
  swept_at_ms: number;
}
export const presenceLapsedSignal = defineSignal<[PresenceLapse]>('presenceLapsed');
/**
 * Sent by the presence sweeper after it recorded an online ⇄ offline transition of the node (node document and
 * ledger event, see activities/federation/node-lifecycle-sweeper.ts): the workflow mirrors it in its status, its query and
 * the NodeState search attribute, with no activity. A mirror only: a backlog of these delays the Temporal view,
 * never the API, the node document or the ledger. Older `seq`s than the newest applied are ignored.
 */
export interface LivenessMirror {
  to: 'online' | 'offline';
  /** ISO time of the transition. */
  at: string;
  /** The node's liveness_seq after it. */
  seq: number;
  reason: string;
}
export const livenessChangedSignal = defineSignal<[LivenessMirror]>('livenessChanged');
export const reviewUpdate = defineUpdate<NodeStatus, [ReviewRequest]>('review');
export const nodeStatusQuery = defineQuery<NodeStatus>('nodeStatus');

/**
 * Extra time past the offline deadline before judging, so a heartbeat received just before the deadline is seen:
 * it covers the worker's shared presence snapshot (at most PRESENCE_SNAPSHOT_MAX_AGE_MS old) and the presence write
 * holding the heartbeat (with the default PRESENCE_FLUSH_MS of 100 ms, the group commit's wait of at most 200 ms and
 * the write itself). A heartbeat written later still is caught by the re-check after going offline. Kept small:
 * a silent node must be offline within NODE_OFFLINE_AFTER_S + 2 s.
 */
export const PRESENCE_GRACE_MS = 500;
export const PRESENCE_SNAPSHOT_MAX_AGE_MS = 250;
