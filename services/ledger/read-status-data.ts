/**
 * The status-data family's reads (GET /api/status-data/metrics, nodes, sync, assets): the ledger's size and recent
 * appends, the node registry with presence, the ledger head's age, and what the hub holds counted by kind. Each
 * prefers the small records the ledger keeps for it (marks, the head's time and tally) and falls back to counting
 * entries only for a ledger begun before those records existed.
 */
import type { Db } from 'mongodb';
import { assetsFromTally, type LedgerTally, tallyCategory } from '../../core/ledger/tally';
import type { Ledger } from '../../store/ledger/ledger';
import type { NodeStore } from '../../store/federation/nodes';
import { SHARED_SNAPSHOT_MS, type PresenceStore } from '../../store/federation/presence';

export interface StatusDataDeps {
  db: Db;
  ledger: Ledger;
  nodes: NodeStore;
  presence: PresenceStore;
}

export function createStatusData({ db, ledger, nodes, presence }: StatusDataDeps) {
  const entries = db.collection('ledger');

  /** The ledger's size and root, and how many entries were appended in the last minute and hour. */
  async function appendMetrics(now: number) {
    const since = (ms: number) => new Date(now - ms).toISOString();
    const head = await ledger.head();
    // From the ledger's marks (store/ledger/heads.ts, appendsSince: one small read, 5 s resolution); counting the
    // entries by created_at (every entry of the window, or of the ledger on FerretDB/SQLite) only for a ledger begun
    // before marks existed, until it has a mark as old as the window (its first hour).
    const appendsSince = async (ms: number) => {
      const marked = await ledger.appendsSince(new Date(now - ms), head);
      return marked.marked ? marked.appends : entries.countDocuments({ created_at: { $gte: since(ms) } });
    };
    const [lastMinute, lastHour] = await Promise.all([appendsSince(60_000), appendsSince(3_600_000)]);
    return { ledger: { size: head.size, root: head.root }, appends: { last_minute: lastMinute, last_hour: lastHour } };
  }

  /**
   * The first 1,000 nodes by registration, with when each was last seen: from the node index (about a second behind
   * the node documents) and a presence snapshot at most SHARED_SNAPSHOT_MS old, no node document read.
   */
  async function nodeRegistry() {
    const [, snapshot] = await Promise.all([nodes.index.ready(), presence.recentSnapshot(SHARED_SNAPSHOT_MS)]);
    const list = nodes.index.page({}, 0, 1000).nodes;
    const seen = (id: string) => {
      const at = snapshot.nodes.get(id)?.seen_at;
      return at ? new Date(at).toISOString() : null;
    };
    return list.map((n) => ({
      node_id: n.node_id,
      name: n.name,
      brand: n.brand ?? null,
      state: n.state,
      last_seen_at: seen(n.node_id)
    }));
  }

  /** The ledger head with the time of its last entry. */
  async function headWithLastEntry() {
    // The head record carries its last entry's time; records written before it did are the only reason to read the entry.
    const head = await ledger.headWithTime();
    const lastEntryAt =
      head.last_entry_at ?? (head.size > 0 ? ((await ledger.get(head.size))?.created_at ?? null) : null);
    return { size: head.size, root: head.root, last_entry_at: lastEntryAt };
  }

  /** Truths by type, the hub's own events, registered DIDs and nodes. */
  async function assets() {
    // The ledger's counts from the tally its head carries (core/ledger/tally.ts: one small read at any size); a
    // ledger begun before tallies existed is counted by grouping its entries (a scan of the ledger).
    const ledgerCounts = async () => {
      const { tally } = await ledger.headWithTally();
      if (tally) return assetsFromTally(tally);
      const [byType, events] = await Promise.all([
        entries
          .aggregate<{ _id: string | null; count: number }>([
            { $match: { kind: 'truth' } },
            { $group: { _id: '$truth_type', count: { $sum: 1 } } }
          ])
          .toArray(),
        entries.countDocuments({ kind: 'event' })
      ]);
      const counted: LedgerTally = { event: events };
      for (const row of byType) {
        const category = tallyCategory('truth', row._id ?? null);
        counted[category] = (counted[category] ?? 0) + row.count;
      }
      return assetsFromTally(counted);
    };
    const [counts, dids, nodeCount] = await Promise.all([
      ledgerCounts(),
      db.collection('dids').countDocuments({ revoked_at: null }),
      nodes.index.ready().then(() => nodes.index.size)
    ]);
    return { ...counts, registered_dids: dids, nodes: nodeCount };
  }

  return { appendMetrics, nodeRegistry, headWithLastEntry, assets };
}
