/**
 * node/<node_id>: the lifecycle of one federation node (states and transitions in core/federation/vocabulary.ts and
 * docs/federation.md).
 *
 * Since the `node-liveness-outside` patch, this workflow no longer decides online ⇄ offline: the presence sweeper
 * (node-sweeper/<group>) decides and records those transitions itself, in batches (node documents and ledger
 * events), and sends `livenessChanged` here; the workflow mirrors it (status, query, NodeState search attribute)
 * with no activity and keeps owning registration, review and continue-as-new. Liveness therefore never waits for
 * workflow tasks. What follows describes runs recorded before that patch, which still replay:
 *
 * Heartbeats do not go through this workflow: the API records them in presence (store/federation/presence.ts)
 * and signals here only when it believes the node is not online. An online node waits, with no timer, for the
 * presence sweeper (node-sweeper/<group>) to report its presence lapsed; it then reads its presence shard itself
 * and goes offline only if that read still shows NODE_OFFLINE_AFTER_S of silence (+ PRESENCE_GRACE_MS for a
 * heartbeat being written at that instant), so a late workflow task never makes a node offline that beat in time.
 * A node that keeps heartbeating costs Temporal nothing. Runs recorded before the sweeper (no patch marker
 * `node-presence-sweeper`) slept on a durable timer until the last heartbeat + NODE_OFFLINE_AFTER_S instead.
 * The history is kept bounded by continue-as-new.
 * Reviews arrive as an update (the reviewer gets the resulting state, or a clear refusal).
 * Every state change is recorded by an activity: a ledger event, then the node document.
 */
import {
  condition,
  continueAsNew,
  log,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  upsertSearchAttributes,
  workflowInfo
} from '@temporalio/workflow';
import type { Activities } from '../../activities';
import type { NodeState } from '../../core/federation/vocabulary';
import {
  heartbeatSignal,
  LivenessMirror,
  livenessChangedSignal,
  NodeLifecycleInput,
  NodeStatus,
  nodeStatusQuery,
  PresenceLapse,
  presenceLapsedSignal,
  PRESENCE_GRACE_MS,
  PRESENCE_SNAPSHOT_MAX_AGE_MS,
  ReviewRequest,
  reviewUpdate
} from '../../contracts/federation/node-lifecycle.contract';
import { NodeStateAttr } from '../../core/search-attributes';

// Runs needing the state change recorded before it (below: LOCAL_STATE_CHANGE) as a regular activity.
const { recordNodeStateChange: recordNodeStateChangeAsTask } = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' }
});
// A state change is a few milliseconds of database writes (idempotent by node and transition number). As a local
// activity it runs inside the workflow task that decided it: one workflow task per transition instead of three
// plus an activity task, which is what bounds how fast the hub absorbs many nodes changing state at once (all
// nodes coming back after a hub outage, a partition taking many offline). Retries past the threshold continue
// on a durable timer.
const { recordNodeStateChange: recordNodeStateChangeLocally } = proxyLocalActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  localRetryThreshold: '10 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' }
});
/** Patch marker: histories recorded before it ran the state change as a regular activity. */
const LOCAL_STATE_CHANGE = 'node-state-change-local-activity';
// The presence check runs on every offline deadline of every node: as a local activity it costs the server one
// marker instead of an activity task round trip.
const { readNodeLastSeen, checkNodePresence } = proxyLocalActivities<Activities>({
  startToCloseTimeout: '10 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds' }
});
/** Patch marker: runs recorded before it slept on a durable timer per offline deadline instead of the sweeper. */
const PRESENCE_SWEEPER = 'node-presence-sweeper';
/** Patch marker: from it on, an approved node's online ⇄ offline transitions are the sweeper's, mirrored here. */
const LIVENESS_OUTSIDE = 'node-liveness-outside';

/** Workflow time (deterministic: the time of the current workflow task). */
const now = (): number => Date.now();

export async function nodeLifecycleWorkflow(input: NodeLifecycleInput): Promise<NodeStatus> {
  const carried = input.carried;
  const offlineAfterMs = input.offline_after_s * 1000;
  const status: NodeStatus = {
    node_id: input.node_id,
    state: carried?.state ?? (input.review_required ? 'pending_review' : 'offline'),
    state_since: carried?.state_since ?? input.registered_at,
    last_seen_at: carried?.last_seen_ms ? new Date(carried.last_seen_ms).toISOString() : null,
    transitions: carried?.transitions ?? 0,
    runs: carried?.runs ?? 0,
    review: carried?.review ?? null
  };
  let lastSeen: number | null = carried?.last_seen_ms ?? null;
  let signalledSeen: number | null = null;
  let pendingReview: ReviewRequest | null = null;
  let rechecked = false;
  let lapse: PresenceLapse | null = null;
  let livenessSeq = carried?.liveness_seq ?? 0;
  let mirror: LivenessMirror | null = null;

  setHandler(nodeStatusQuery, () => status);
  setHandler(heartbeatSignal, (hb) => {
    const at = Number(hb?.seen_at_ms);
    if (Number.isFinite(at) && at > (signalledSeen ?? 0)) signalledSeen = at;
  });
  setHandler(presenceLapsedSignal, (l) => {
    const swept = Number(l?.swept_at_ms);
    if (Number.isFinite(swept) && swept > (lapse?.swept_at_ms ?? -1))
      lapse = { seen_at_ms: Number.isFinite(Number(l?.seen_at_ms)) ? Number(l.seen_at_ms) : null, swept_at_ms: swept };
  });
  setHandler(livenessChangedSignal, (m) => {
    const seq = Number(m?.seq);
    if (
      Number.isFinite(seq) &&
      seq > Math.max(livenessSeq, mirror?.seq ?? 0) &&
      (m.to === 'online' || m.to === 'offline')
    )
      mirror = { to: m.to, at: String(m.at), seq, reason: String(m.reason ?? '') };
  });
  setHandler(
    reviewUpdate,
    async (request) => {
      pendingReview = request;
      await condition(() => pendingReview === null);
      return { ...status };
    },
    {
      validator: (request) => {
        if (!request || (request.decision !== 'approve' && request.decision !== 'reject'))
          throw new Error('decision must be approve or reject');
        if (pendingReview) throw new Error('another review decision for this node is being applied');
        if (status.state === 'rejected') throw new Error(`node ${input.node_id} is already rejected`);
        if (request.decision === 'approve' && status.state !== 'pending_review')
          throw new Error(`node ${input.node_id} is ${status.state}, not waiting for review`);
      }
    }
  );

  const seen = (at: number | null) => {
    if (at !== null && at > (lastSeen ?? 0)) {
      lastSeen = at;
      status.last_seen_at = new Date(at).toISOString();
    }
  };

  const transition = async (
    from: NodeState | null,
    to: NodeState,
    reason: string,
    actor: string,
    review?: ReviewRequest
  ) => {
    status.transitions += 1;
    const at = new Date(now()).toISOString();
    const decision = review
      ? {
          decision: review.decision === 'approve' ? ('approved' as const) : ('rejected' as const),
          reviewer: review.reviewer,
          reason: review.reason
        }
      : undefined;
    const record = patched(LOCAL_STATE_CHANGE) ? recordNodeStateChangeLocally : recordNodeStateChangeAsTask;
    await record({
      node_id: input.node_id,
      from,
      to,
      at,
      reason,
      actor,
      transition: status.transitions,
      hub_did: input.hub_did,
      review: decision,
      // The registration's event names the DID it linked (an argument only: runs recorded before replay the same).
      ...(from === null && input.did ? { did: input.did } : {})
    });
    status.state = to;
    status.state_since = at;
    if (decision) status.review = { ...decision, at };
    if (to === 'offline') rechecked = false;
    if (to === 'online') lapse = null;
    upsertSearchAttributes([{ key: NodeStateAttr, value: to }]);
    log.info('node state changed', { nodeId: input.node_id, from, to, reason });
  };

  const applyReview = async (request: ReviewRequest) => {
    const reviewer = String(request.reviewer ?? 'unknown');
    const reason = String(request.reason ?? '');
    if (request.decision === 'approve') {
      seen(await readNodeLastSeen({ node_id: input.node_id, max_age_ms: 0 }));
      seen(signalledSeen);
      const alive = lastSeen !== null && now() - lastSeen < offlineAfterMs;
      await transition(status.state, alive ? 'online' : 'offline', `approved by review: ${reason}`, reviewer, {
        decision: 'approve',
        reviewer,
        reason
      });
    } else {
      await transition(status.state, 'rejected', `rejected by review: ${reason}`, reviewer, {
        decision: 'reject',
        reviewer,
        reason
      });
    }
  };

  if (!carried) await transition(null, status.state, 'registered', 'hub');

  for (;;) {
    if (pendingReview) {
      await applyReview(pendingReview);
      pendingReview = null;
      continue;
    }
    if (mirror !== null) {
      // A liveness transition the sweeper recorded: mirrored only (no activity, no ledger event of ours).
      const m: LivenessMirror = mirror;
      mirror = null;
      if (m.seq > livenessSeq && (status.state === 'online' || status.state === 'offline')) {
        livenessSeq = m.seq;
        if (m.to !== status.state) {
          status.state = m.to;
          status.state_since = m.at;
          upsertSearchAttributes([{ key: NodeStateAttr, value: m.to }]);
        }
        if (m.to === 'online') seen(Date.parse(m.at));
      }
      continue;
    }
    if (status.state === 'rejected') return status;
    if (workflowInfo().historyLength >= input.history_limit) {
      const next: NodeLifecycleInput = {
        ...input,
        carried: {
          state: status.state,
          state_since: status.state_since,
          last_seen_ms: lastSeen,
          transitions: status.transitions,
          runs: status.runs + 1,
          review: status.review,
          ...(livenessSeq > 0 ? { liveness_seq: livenessSeq } : {})
        }
      };
      return continueAsNew<typeof nodeLifecycleWorkflow>(next);
    }

    if (status.state === 'pending_review') {
      await condition(() => pendingReview !== null);
      continue;
    }

    if ((status.state === 'online' || status.state === 'offline') && patched(LIVENESS_OUTSIDE)) {
      // The sweeper decides and records liveness; this run waits for a review, a mirror, or its history limit.
      await condition(
        () => pendingReview !== null || mirror !== null || workflowInfo().historyLength >= input.history_limit
      );
      continue;
    }

    if (status.state === 'online' && patched(PRESENCE_SWEEPER)) {
      // No timer: the sweeper reports a lapse; the decision is this workflow's, from a fresh read of presence.
      // (Signals alone, e.g. many wake-ups, also grow the history: past the limit, loop to continue as new.)
      await condition(
        () =>
          pendingReview !== null ||
          lapse !== null ||
          mirror !== null ||
          workflowInfo().historyLength >= input.history_limit
      );
      if (pendingReview || mirror || lapse === null) continue;
      const reported: PresenceLapse = lapse;
      lapse = null;
      const check = await checkNodePresence({ node_id: input.node_id, not_before_ms: reported.swept_at_ms });
      seen(check.seen_at);
      seen(signalledSeen);
      // Judged on presence alone (what the sweeper watches), so a node kept online here is reported again once
      // its newer heartbeat lapses; without a presence entry, on the newest heartbeat this run knows.
      const silentSince = check.seen_at ?? lastSeen ?? Date.parse(status.state_since);
      if (check.checked_at - silentSince >= offlineAfterMs + PRESENCE_GRACE_MS) {
        await transition('online', 'offline', `no heartbeat for ${input.offline_after_s} s`, 'hub');
      }
      continue;
    }

    if (status.state === 'online') {
      // Sleep until the offline deadline of the last heartbeat known here (a durable timer).
      const deadline = (lastSeen ?? Date.parse(status.state_since)) + offlineAfterMs + PRESENCE_GRACE_MS;
      if (await condition(() => pendingReview !== null || mirror !== null, Math.max(1, deadline - now()))) continue;
      seen(await readNodeLastSeen({ node_id: input.node_id, max_age_ms: PRESENCE_SNAPSHOT_MAX_AGE_MS }));
      seen(signalledSeen);
      const silentSince = lastSeen ?? Date.parse(status.state_since);
      if (now() - silentSince >= offlineAfterMs)
        await transition('online', 'offline', `no heartbeat for ${input.offline_after_s} s`, 'hub');
      continue;
    }

    // offline: a heartbeat signal brings the node back; one presence re-check covers API processes whose cached
    // view of the node was stale when it went offline.
    const heartbeatSince = () => signalledSeen !== null && signalledSeen > (lastSeen ?? 0);
    const wake = () => pendingReview !== null || mirror !== null || heartbeatSince();
    const woke = rechecked ? (await condition(wake), true) : await condition(wake, input.offline_recheck_ms);
    if (pendingReview || mirror) continue;
    if (!woke) {
      rechecked = true;
      const fresh = await readNodeLastSeen({ node_id: input.node_id, max_age_ms: 0 });
      if (fresh !== null && fresh > (lastSeen ?? 0) && now() - fresh < offlineAfterMs) {
        seen(fresh);
        await transition('offline', 'online', 'heartbeat received', 'hub');
      }
      continue;
    }
    seen(signalledSeen);
    await transition('offline', 'online', 'heartbeat received', 'hub');
  }
}
