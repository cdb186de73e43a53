/**
 * Activities of the node-sweeper/<group> workflow (workflows/federation/node-lifecycle-sweeper.ts): the presence
 * sweep of one group of presence shards, which decides and records every online ⇄ offline transition of its nodes
 * (a ledger event each, idempotent by node and liveness_seq, and a mirror signal to the node's workflow).
 */
import { Ledger } from '../../store/ledger/ledger';
import type { LivenessTransition } from '../../store/federation/node-liveness';
import { NodeStore } from '../../store/federation/nodes';
import { Context } from '@temporalio/activity';
import { WorkflowNotFoundError } from '@temporalio/client';
import { presenceHorizon, PresenceStore, presenceShardOf, PRESENCE_SHARDS } from '../../store/federation/presence';
import {
  LivenessMirror,
  livenessChangedSignal,
  nodeWorkflowId
} from '../../contracts/federation/node-lifecycle.contract';

/** Most mirror signals one sweep has in flight at once. */
const SWEEP_SIGNALS_IN_FLIGHT = 16;
/**
 * Most mirror signals one sweep sends a second. Each is a workflow task of the core queue, where the sweepers' own
 * workflow tasks (their start, and one between two runs of the sweep) wait too: a 10,000-node mass online mirrored
 * at once would queue 10,000 workflow tasks ahead of them. Paced, the mirrors of a mass event arrive over minutes
 * (only the Temporal view waits) and the queue stays short.
 */
const SWEEP_MIRRORS_PER_S = 4;
/** Most ledger appends one sweep has in flight at once (the ledger group-commits them). */
const LEDGER_APPENDS_IN_FLIGHT = 256;
/** node_changes records written this long before the previous read are read again (clocks of hosts differ). */
const CHANGES_CLOCK_MARGIN_MS = 5000;
/**
 * Least time between two sweep ticks. Between the regular ticks (tick_ms) a sweep wakes when an online node may
 * lapse: at the earliest moment the presence horizon can pass an online node's last heartbeat + the window (as of
 * the last read, plus that read's horizon lag), so a silent node is judged within this of its due time instead of
 * within a whole tick. Beating nodes are never due before their next heartbeat, so a steady fleet keeps the regular
 * ticks; a mass silence wakes the sweep at most every SWEEP_MIN_TICK_MS while its nodes fall due.
 */
const SWEEP_MIN_TICK_MS = 200;
/** A sweep whose group has no approved node reads presence this often (to adopt a node whose change record was lost). */
const ADOPT_READ_MS = 10_000;
/** A sweep tick longer than this is logged with where its time went. */
const SLOW_TICK_MS = 2000;
/** Most beating nodes unknown to a sweep's view read from their documents in one tick. */
const MAX_UNKNOWN_PER_TICK = 1000;
/** A beating node found to have no document is looked up again after this long. */
const UNKNOWN_RECHECK_MS = 60_000;
/** A retried sweep appends again the ledger events of the transitions this recent (a crash between the writes). */
const LIVENESS_RECOVERY_MS = 120_000;

/** Awaits `work` while heartbeating every second, so that Temporal does not take the attempt for dead meanwhile. */
async function whileBeating<T>(ctx: Context, work: Promise<T>): Promise<T> {
  const beat = () => ctx.heartbeat({ loading: true });
  beat();
  const alive = setInterval(beat, 1000);
  try {
    return await work;
  } finally {
    clearInterval(alive);
  }
}

export function createNodeSweeperActivities(deps: {
  ledger: Ledger;
  nodes: NodeStore;
  presence: PresenceStore;
  hubDid?: string;
}) {
  return {
    /**
     * The presence sweep of one group of shards (node-sweeper/<group>), for run_ms: the sweeper decides and records
     * every online ⇄ offline transition of the approved nodes of its shards. It keeps each node's liveness view
     * (state, liveness_seq, state_changed_at: read once, then kept by its own writes and the node_changes log,
     * which carries registrations, review decisions and removals) and every tick reads its shards' presence once:
     * - an online node whose newest heartbeat (or, without one, its last state change) is NODE_OFFLINE_AFTER_S
     *   older than its shard's presence horizon goes offline: the start of that read, or earlier when an API process
     *   has not stored every heartbeat of the shard it received before then (the later of its presence clock and its
     *   shard document's own complete time, presenceHorizon), so neither a late tick
     *   nor presence writes falling behind make a node offline that beat in time. (No PRESENCE_GRACE_MS here: that
     *   allowance is the node workflow's, for its shared snapshot of presence and a heartbeat's write in flight,
     *   both of which the horizon already accounts for exactly.);
     * - an offline node with a heartbeat newer than its last state change, within the window of the horizon, goes
     *   online.
     * Ticks come every tick_ms, and sooner (SWEEP_MIN_TICK_MS at the least) when an online node falls due. A group
     * with no approved node reads presence only every ADOPT_READ_MS (to adopt a node whose change record was lost).
     * A beating node missing from the view (its change record lost, e.g. a registration's best-effort record under
     * overload) is read from its document and judged like the others.
     * A tick reads presence and the node_changes log together, and its transitions are written together
     * (NodeStore.applyLiveness: a conditional update by _id each, so a review or rejection written meanwhile wins),
     * then their ledger events are appended (group-committed, off
     * the tick, idempotent by `node-liveness:<node>:<seq>`) and each node's workflow gets `livenessChanged`, a
     * mirror sent at most SWEEP_SIGNALS_IN_FLIGHT at a time, coalesced per node. No workflow task is on the way
     * of a transition. The run ends once run_ms passed and its ledger events and mirrors are out. A retried attempt
     * (the previous one's worker died) appends again the events of the transitions of the last
     * LIVENESS_RECOVERY_MS and mirrors them again (both idempotent).
     */
    async sweepPresence(input: {
      group: number;
      groups: number;
      offline_after_s: number;
      tick_ms: number;
      run_ms: number;
      hub_did?: string;
    }): Promise<{ offline: number; online: number; mirrored: number }> {
      const ctx = Context.current();
      const client = ctx.client;
      const hubDid = input.hub_did ?? deps.hubDid ?? 'did:zhongshu:hub';
      const shards = Array.from({ length: PRESENCE_SHARDS }, (_, s) => s).filter(
        (s) => s % input.groups === input.group
      );
      const mine = new Set(shards);
      const ours = (id: string) => mine.has(presenceShardOf(id));
      const offlineAfterMs = input.offline_after_s * 1000;
      /** Whether the view holds an approved node (one the sweep judges). */
      const judgesAny = () => [...view.values()].some((v) => v.state === 'online' || v.state === 'offline');
      const reasons = { offline: `no heartbeat for ${input.offline_after_s} s`, online: 'heartbeat received' };
      let cursor = Date.now();
      // Alive from the start: the first read of the nodes' documents takes seconds under a large fleet on a busy
      // database, and an attempt silent for Temporal's heartbeat timeout (5 s) is retried beside this one, which
      // then reads the same documents again (a 10,000-node run piled such retries up into parallel scans).
      const view = await whileBeating(ctx, deps.nodes.loadLiveness(ours));
      let offline = 0;
      let online = 0;
      let mirrored = 0;
      let adopted = 0;
      /** Beating nodes found to have no document, and when (see the adoption in the tick). */
      const absent = new Map<string, number>();
      /** Ledger events of applied transitions not yet appended; mirrors not yet sent (newest per node). */
      const events: LivenessTransition[] = [];
      const mirrors = new Map<string, LivenessMirror>();
      /** Transitions whose write failed: settled (were they applied?) at the next tick. */
      let uncertain: LivenessTransition[] = [];
      const applied = (t: LivenessTransition) => {
        view.set(t.node_id, { state: t.to, seq: t.seq, state_at: Date.parse(t.at) });
        events.push(t);
        mirrors.set(t.node_id, { to: t.to, at: t.at, seq: t.seq, reason: t.reason });
        if (t.to === 'offline') offline++;
        else online++;
      };
      if (ctx.info.attempt > 1) {
        for (const [id, v] of view) {
          if (
            v.seq > 0 &&
            (v.state === 'online' || v.state === 'offline') &&
            Date.now() - v.state_at < LIVENESS_RECOVERY_MS
          ) {
            const t: LivenessTransition = {
              node_id: id,
              from: v.state === 'online' ? 'offline' : 'online',
              to: v.state,
              at: new Date(v.state_at).toISOString(),
              reason: reasons[v.state],
              seq: v.seq
            };
            events.push(t);
            mirrors.set(id, { to: t.to, at: t.at, seq: t.seq, reason: t.reason });
          }
        }
      }

      // Ledger events: appended off the tick (the ledger group-commits them), retried until they are in.
      let appending: Promise<void> | null = null;
      const appendEvents = () => {
        if (appending || events.length === 0) return;
        const batch = events.splice(0, LEDGER_APPENDS_IN_FLIGHT);
        let failed = false;
        appending = Promise.all(
          batch.map((t) =>
            deps.ledger
              .append({
                kind: 'event',
                key: 'hub.node.state_changed',
                value: {
                  node_id: t.node_id,
                  from: t.from,
                  to: t.to,
                  at: t.at,
                  reason: t.reason,
                  actor: 'hub',
                  liveness_seq: t.seq
                },
                truth_type: 'data',
                did: hubDid,
                idempotencyKey: `node-liveness:${t.node_id}:${t.seq}`
              })
              .then(
                () => undefined,
                (err: unknown) => {
                  failed = true;
                  events.push(t);
                  ctx.log.warn('presence sweep: ledger append failed, retried', {
                    nodeId: t.node_id,
                    error: String(err)
                  });
                }
              )
          )
        ).then(() => {
          appending = null;
          // After a failure the next tick tries again (no retry loop while the database is away).
          if (!failed) appendEvents();
        });
      };
      // Mirrors: at most SWEEP_SIGNALS_IN_FLIGHT signals at once, the newest transition per node.
      let sending = 0;
      let lastPresenceRead = 0;
      let mirrorBudget = 0;
      /** Most mirrors one tick may start (at least one, whatever tick_ms). */
      const maxCredit = Math.max(1, (SWEEP_MIRRORS_PER_S * input.tick_ms) / 1000);
      /** Mirrors earned at SWEEP_MIRRORS_PER_S and not yet spent (ticks come at varying intervals). */
      let mirrorCredit = maxCredit;
      let lastTickAt = Date.now();
      /** The previous presence read and its horizons per shard: an early wake is for a horizon that moves. */
      let lastReadAt = 0;
      let lastHorizons = new Map<number, number>();
      const sendMirrors = () => {
        while (sending < SWEEP_SIGNALS_IN_FLIGHT && mirrors.size > 0 && mirrorBudget > 0) {
          mirrorBudget--;
          const [id, m] = mirrors.entries().next().value!;
          mirrors.delete(id);
          sending++;
          void client.workflow
            .getHandle(nodeWorkflowId(id))
            .signal(livenessChangedSignal, m)
            .then(
              () => {
                mirrored++;
                sending--;
                sendMirrors();
              },
              (err: unknown) => {
                // A closed workflow (a rejected node) needs no mirror; anything else is sent again at the next
                // tick (unless a newer one is queued).
                sending--;
                if (!(err instanceof WorkflowNotFoundError) && !mirrors.has(id)) mirrors.set(id, m);
              }
            );
        }
      };

      /**
       * One read of the group's presence: the API processes' presence clocks first, then the shards, one at a time
       * (measured: reading a group's four shards at once, with every group doing the same, went with heartbeat p99
       * 780 ms and presence writes 2.3 s behind in one 10,000-node run, for no gain in detection).
       * Every heartbeat of a shard received before its horizon is in what the read returns, later ones may not be
       * yet (a database behind on presence writes): judgements are made as of the horizon, so writes lagging behind
       * never make a beating node look silent. Per shard: a process's clock waits for the slowest of its 16 shard
       * writes (and is rewritten every PRESENCE_CLOCK_MS), its document of a shard says how complete that shard is.
       */
      const readGroupPresence = async () => {
        const readAt = Date.now();
        // The clocks before the shards: a clock holds for any read after it, a shard document's own complete time
        // for what that read returned (presenceHorizon takes the later of the two per process).
        const clocks = await deps.presence.readClocks();
        const seen = new Map<string, number>();
        const horizons = new Map<number, number>();
        for (const shard of shards) {
          const read = await deps.presence.readSeen(shard);
          for (const [id, at] of read.nodes) seen.set(id, at);
          horizons.set(shard, presenceHorizon(clocks, readAt, offlineAfterMs, read.complete));
        }
        return { readAt, horizons, seen };
      };

      // Alive while a tick is long (thousands of transitions at once): Temporal's heartbeat timeout must not start a
      // second sweep of this group beside this one.
      const beat = () =>
        ctx.heartbeat({
          offline,
          online,
          mirrored,
          adopted,
          watched: view.size,
          events: events.length,
          mirrors: mirrors.size
        });
      const alive = setInterval(beat, 1000);
      try {
        const end = Date.now() + input.run_ms;
        while (
          Date.now() < end ||
          events.length > 0 ||
          appending ||
          mirrors.size > 0 ||
          sending > 0 ||
          uncertain.length > 0
        ) {
          const sweptAt = Date.now();
          // The group's presence read starts with the tick, beside the read of what changed in the node documents
          // (registrations, reviews, removals, others' writes): a judgement is stamped with the presence read's start,
          // so a node due at the wake is judged as of then, not after a node-changes read slowed by load (up to 1 s
          // in a 10,000-node mass silence). With no approved node in the group (a hub with no nodes yet) there is
          // nothing to judge, and presence is read only every ADOPT_READ_MS, to adopt a beating node whose change
          // record the view never got (a group whose first approved node arrives in this tick's changes reads it
          // after them).
          const judging = judgesAny() || sweptAt - lastPresenceRead >= ADOPT_READ_MS;
          let presence = judging ? readGroupPresence() : null;
          // Settled below whatever happens to the changes read (no unhandled rejection).
          presence?.catch(() => undefined);
          const records = await deps.nodes.changesSince(new Date(cursor - CHANGES_CLOCK_MARGIN_MS));
          cursor = sweptAt;
          records.sort(
            (a, b) => a.state_at.getTime() - b.state_at.getTime() || a.written_at.getTime() - b.written_at.getTime()
          );
          for (const r of records) {
            if (!ours(r.node_id)) continue;
            if (r.state === null) {
              view.delete(r.node_id);
              continue;
            }
            const v = view.get(r.node_id);
            const at = r.state_at.getTime();
            if (!v) view.set(r.node_id, { state: r.state, seq: r.liveness_seq ?? 0, state_at: at });
            else {
              if (r.liveness_seq !== undefined && r.liveness_seq > v.seq) v.seq = r.liveness_seq;
              if (at >= v.state_at) {
                v.state = r.state;
                v.state_at = at;
              }
            }
          }
          if (uncertain.length > 0) {
            const settled = await deps.nodes.settleLiveness(uncertain);
            await deps.nodes.recordLivenessChanges(settled.applied);
            for (const t of settled.applied) applied(t);
            for (const [id, v] of settled.refused) v ? view.set(id, v) : view.delete(id);
            uncertain = [];
          }

          const changesMs = Date.now() - sweptAt;
          // The changes brought the group's first approved node: read presence now (never judge without a read).
          if (!presence && judgesAny()) presence = readGroupPresence();
          // Every judgement applies to the presence horizon, at most the time the presence read started.
          const { readAt, horizons, seen } = presence
            ? await presence
            : { readAt: sweptAt, horizons: new Map<number, number>(), seen: new Map<string, number>() };
          /** The group's least horizon (the slow-tick log). */
          const horizon = Math.min(readAt, ...horizons.values());
          if (presence) lastPresenceRead = readAt;
          // A beating node the view does not know (its change record was lost, e.g. a registration's best-effort
          // record under overload) is read from its document; one that has none (removed) is asked again at most
          // every UNKNOWN_RECHECK_MS.
          const unknown = [...seen.keys()]
            .filter((id) => !view.has(id) && !(readAt - (absent.get(id) ?? -Infinity) < UNKNOWN_RECHECK_MS))
            .slice(0, MAX_UNKNOWN_PER_TICK);
          if (unknown.length > 0) {
            const found = await deps.nodes.livenessOf(unknown);
            for (const id of unknown) {
              const v = found.get(id);
              if (v) view.set(id, v);
              else absent.set(id, readAt);
            }
            if (absent.size > 10 * MAX_UNKNOWN_PER_TICK)
              for (const [id, t] of absent) if (readAt - t >= UNKNOWN_RECHECK_MS) absent.delete(id);
            adopted += found.size;
          }
          const presenceMs = Date.now() - sweptAt - changesMs;
          const at = new Date(readAt).toISOString();
          const proposals: LivenessTransition[] = [];
          // The next tick comes sooner when an online node falls due (below), only for shards whose horizon keeps up
          // with the clock (at least half as fast): a horizon held back by presence writes that stall would otherwise
          // keep a due node "almost due", and the sweep re-reading an overloaded database five times a second. Per
          // shard, so one stalled shard does not delay the judgements of the others by a whole tick.
          const moving = new Set(
            shards.filter(
              (sh) =>
                lastReadAt === 0 ||
                (horizons.get(sh) ?? readAt) - (lastHorizons.get(sh) ?? 0) >= (readAt - lastReadAt) / 2
            )
          );
          /**
           * When, by the clock, an online node not proposed now may lapse at the earliest: its due time plus its
           * shard's horizon lag in this read (the horizon moving as it did up to this read).
           */
          let nextWake = Infinity;
          for (const [id, v] of presence ? view : []) {
            const last = seen.get(id);
            const shard = presenceShardOf(id);
            // The horizon of the node's shard: every heartbeat of it received before then is in `seen`.
            const nodeHorizon = horizons.get(shard) ?? readAt;
            if (v.state === 'online') {
              const due = Math.max(last ?? 0, v.state_at) + offlineAfterMs;
              if (nodeHorizon >= due)
                proposals.push({
                  node_id: id,
                  from: 'online',
                  to: 'offline',
                  at,
                  reason: reasons.offline,
                  seq: v.seq + 1
                });
              else if (moving.has(shard)) nextWake = Math.min(nextWake, due + (readAt - nodeHorizon));
            } else if (v.state === 'offline') {
              if (last !== undefined && last > v.state_at && nodeHorizon - last < offlineAfterMs)
                proposals.push({
                  node_id: id,
                  from: 'offline',
                  to: 'online',
                  at,
                  reason: reasons.online,
                  seq: v.seq + 1
                });
            }
          }
          if (proposals.length > 0) {
            const result = await deps.nodes.applyLiveness(proposals);
            for (const t of result.applied) applied(t);
            for (const [id, v] of result.refused) v ? view.set(id, v) : view.delete(id);
            uncertain = result.failed;
          }
          const tickMs = Date.now() - sweptAt;
          // A slow tick delays every judgement of the group: say where its time went (operators, benches).
          if (tickMs > SLOW_TICK_MS) {
            ctx.log.warn('presence sweep tick slow', {
              group: input.group,
              tickMs,
              changesMs,
              presenceMs,
              applyMs: tickMs - changesMs - presenceMs,
              proposals: proposals.length,
              horizonLagMs: readAt - horizon,
              watched: view.size
            });
          }
          appendEvents();
          // Mirrors not started last tick (signals in flight at the limit) stay earned.
          mirrorCredit = Math.min(
            maxCredit,
            mirrorCredit + mirrorBudget + (SWEEP_MIRRORS_PER_S * (sweptAt - lastTickAt)) / 1000
          );
          lastTickAt = sweptAt;
          mirrorBudget = Math.floor(mirrorCredit);
          mirrorCredit -= mirrorBudget;
          sendMirrors();
          beat();
          // The next tick: the regular one, or sooner when an online node of a moving shard falls due (its horizon
          // trailing the read by what it trailed this one).
          if (presence) {
            lastReadAt = readAt;
            lastHorizons = horizons;
          }
          const dueIn = nextWake - Date.now();
          const rest = Math.max(
            SWEEP_MIN_TICK_MS - (Date.now() - sweptAt),
            Math.min(input.tick_ms - (Date.now() - sweptAt), dueIn)
          );
          if (rest > 0) await ctx.sleep(rest);
        }
      } finally {
        clearInterval(alive);
      }
      return { offline, online, mirrored };
    }
  };
}
