/**
 * What external_node authentication needs about a node (key digest, state, brand), held per API process so that a
 * heartbeat costs no database round trip of its own.
 *
 * A node is read from its document once (its first request to this process) and then kept, up to date: every
 * change to a node document after registration (a state change, review decision or removal; NodeStore.setState,
 * NodeStore.delete) also inserts a small record into `node_changes` (store/federation/node-change-log.ts), and each process
 * reads the records newer than its last read every NODE_CHANGES_POLL_MS (a read of a collection holding only the
 * last NODE_CHANGES_KEEP_MS of changes, whatever the fleet size). So a rejected or removed node is refused by every
 * API process within NODE_CHANGES_POLL_MS plus one read (about 1 s), and a state change is seen as soon.
 * Records are applied per node in the order of their time, and never over a newer state this process caused itself
 * (note()).
 *
 * Nodes are known without a read of their own wherever possible: at start (start()) the cache loads every node
 * (up to MAX_ENTRIES) in one projected scan, and a registration's change record carries what authentication needs
 * (the key's digest and brand), so every process learns a new node from the log. Before, each node was read at its
 * first request to the process: an API process restarting under a 10,000-node fleet, or a mass online after
 * registrations, read them by `_id: { $in }` reads, each of which costs a scan of the collection on FerretDB (0.7-1 s
 * at 10,000 nodes whatever its size), and heartbeats waited up to 30 s in authentication. A scan of the 10,000 costs
 * about the same single second.
 *
 * Misses (a node registered while this process could not read the log, an entry evicted, a preload that failed)
 * share reads: the nodes missed while a read is in flight are read together by the next one (one `find` of up to
 * MAX_IDS_PER_READ ids; one such read in flight per process). A miss during the preload waits for it first.
 *
 * When the change log cannot be read (the database is unreachable, or this process paused for longer than the
 * records are kept), the cache falls back to what it did before the log existed: an entry older than
 * NODE_CACHE_TTL_MS is read again from the node document. NODE_CACHE_TTL_MS below NODE_CHANGES_POLL_MS (tests) also
 * means reading again after the TTL. The node workflow re-checks presence once after NODE_CACHE_TTL_MS + 1 s after a
 * node goes offline, which covers heartbeats answered from a cache that still said "online".
 *
 * The same scan and log reads keep the node directory's index (node-index.ts, NodeStore.index) current: the preload
 * loads it and every record read is applied to it. It follows the log even where the cache itself does not (a
 * NODE_CACHE_TTL_MS below NODE_CHANGES_POLL_MS).
 */
import type { NodeState } from '../../core/federation/vocabulary';
import type { NodeChangeDocument } from './node-change-log';
import type { NodeAuthDocument } from './nodes';
import { NodeStore } from './nodes';
import { NODE_CHANGES_KEEP_MS } from './node-changes-ring';

export interface CachedNode {
  node_id: string;
  api_key_hash: string;
  state: NodeState;
  brand: string;
  loaded_at: number;
  /** Time (ms) of the newest change applied to this entry: its document's state_changed_at, a record or a note. */
  state_at: number;
}

/** How often each API process reads the change log. */
export const NODE_CHANGES_POLL_MS = 1000;
/** Ids in one shared read of node documents (misses beyond it wait for the next read). */
export const MAX_IDS_PER_READ = 1000;
/** Most nodes held (the oldest loaded is dropped beyond it), and the most one preload reads. */
export const MAX_ENTRIES = 200_000;
/**
 * Most ids held as having no document (the oldest dropped beyond it). An id read and found absent is refused without
 * a read for NODE_CACHE_TTL_MS (unless the log brings its registration first): a flood of requests naming unknown
 * node ids costs one shared read per id per TTL instead of one per request, and each is answered at once (it holds
 * the presence clock only as long as that).
 */
export const MAX_ABSENT = 100_000;
/** Records written this long before the previous read are read again (clocks of API and worker hosts differ). */
const CLOCK_MARGIN_MS = 5000;

export interface NodeCacheStats {
  /** Node documents read (first sight, or a fallback reload). */
  loads: number;
  /** Nodes known from the preload's scan. */
  preloaded: number;
  /** Nodes known from their registration's change record. */
  registered: number;
  /** Database reads that loaded them (misses arriving together share one). */
  reads: number;
  /** Answers from the cache. */
  hits: number;
  /** Change records applied. */
  changes: number;
  /** Requests for an id known to have no document, answered without a read. */
  absent: number;
}

interface Loaded {
  doc: NodeAuthDocument | null;
  /** When the read that found it began (ms). */
  readAt: number;
}

export class NodeCache {
  private readonly entries = new Map<string, CachedNode>();
  /** When the change log was last read completely (ms), or 0: entries loaded before it are exact. */
  private logReadAt = 0;
  /** Start (ms) of the last successful read; the next one asks for records newer than this minus the margin. */
  private logCursor = 0;
  private timer: NodeJS.Timeout | null = null;
  private polling = false;
  /** Start (ms) of the earliest read of node documents whose records the log has not been read again for (replayFrom). */
  private rewindTo: number | null = null;
  readonly stats: NodeCacheStats = { loads: 0, preloaded: 0, registered: 0, reads: 0, hits: 0, changes: 0, absent: 0 };
  /** Ids a read found no document for, and when that read began (ms): see MAX_ABSENT. */
  private readonly absent = new Map<string, number>();
  /** The preload under way (misses wait for it), or null. */
  private preloading: Promise<void> | null = null;
  /** Misses waiting for the next shared read, by node id. */
  private readonly waiting = new Map<string, { resolve: (loaded: Loaded) => void; reject: (err: unknown) => void }[]>();
  private reading = false;

  /** Whether the cache's entries follow the log (else a plain NODE_CACHE_TTL_MS cache; the index follows it anyway). */
  private readonly follows: boolean;

  constructor(
    private readonly nodes: NodeStore,
    private readonly ttlMs: number,
    private readonly onPollError: (err: unknown) => void = () => undefined
  ) {
    this.follows = ttlMs >= NODE_CHANGES_POLL_MS;
    nodes.index.attachLoader(() => this.preload());
  }

  /**
   * Loads every node and starts following the change log (the API does). With NODE_CACHE_TTL_MS below
   * NODE_CHANGES_POLL_MS the cache is a plain TTL cache, loaded as misses come, and only the directory's index
   * follows the log.
   */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.poll(), NODE_CHANGES_POLL_MS);
    this.timer.unref();
    void this.poll();
    void this.preload();
  }

  /**
   * Loads up to MAX_ENTRIES nodes in one projected scan; misses meanwhile wait for it. An entry is as recent as the
   * scan's start, like a miss's read: the change log brings what changed since. On failure the misses are read as
   * they come (onPollError reports it).
   */
  preload(): Promise<void> {
    this.preloading ??= (async () => {
      const readAt = Date.now();
      this.stats.reads++;
      this.nodes.index.beginLoad();
      try {
        const docs = await this.nodes.allAuth(MAX_ENTRIES);
        for (const doc of docs) {
          this.put(doc, readAt);
          this.stats.preloaded++;
        }
        this.nodes.index.load(docs, readAt, true);
        this.replayFrom(readAt);
      } catch (err) {
        this.onPollError(err);
      } finally {
        this.nodes.index.endLoad();
        this.preloading = null;
      }
    })();
    return this.preloading;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Whether an entry can be trusted without reading its document again. */
  private fresh(entry: CachedNode, now: number): boolean {
    if (now - entry.loaded_at < this.ttlMs) return true;
    // Exact while the log is followed: read within two polls, and the entry was loaded before that read began.
    return (
      this.follows &&
      this.logReadAt > 0 &&
      now - this.logReadAt < 2 * NODE_CHANGES_POLL_MS + CLOCK_MARGIN_MS &&
      entry.loaded_at <= this.logReadAt
    );
  }

  async get(nodeId: string): Promise<CachedNode | null> {
    const hit = this.entries.get(nodeId);
    if (hit && this.fresh(hit, Date.now())) {
      this.stats.hits++;
      return hit;
    }
    const absentSince = hit ? undefined : this.absent.get(nodeId);
    if (absentSince !== undefined && Date.now() - absentSince < this.ttlMs) {
      this.stats.absent++;
      return null;
    }
    if (!hit && this.preloading) {
      await this.preloading;
      const loaded = this.entries.get(nodeId);
      if (loaded && this.fresh(loaded, Date.now())) {
        this.stats.hits++;
        return loaded;
      }
    }
    this.stats.loads++;
    const { doc, readAt } = await this.load(nodeId);
    if (!doc) {
      // Learned from the change log after this read began (its registration): newer than what the read found.
      const meanwhile = this.entries.get(nodeId);
      if (meanwhile && meanwhile.loaded_at > readAt) return meanwhile;
      this.entries.delete(nodeId);
      this.absent.delete(nodeId);
      this.absent.set(nodeId, readAt);
      if (this.absent.size > MAX_ABSENT) this.absent.delete(this.absent.keys().next().value!);
      return null;
    }
    return this.put(doc, readAt);
  }

  /** Holds a node as read at `readAt` (ms), keeping a newer state a note or record applied meanwhile. */
  private put(doc: NodeAuthDocument, readAt: number): CachedNode {
    const entry: CachedNode = {
      node_id: doc._id,
      api_key_hash: doc.api_key_hash,
      state: doc.state,
      brand: doc.brand.code,
      // When its read began: the document is at least that recent (what fresh() compares with the log's reads).
      loaded_at: readAt,
      state_at: Date.parse(doc.state_changed_at) || 0
    };
    this.absent.delete(doc._id);
    const meanwhile = this.entries.get(doc._id);
    if (meanwhile && meanwhile.state_at > entry.state_at) {
      entry.state = meanwhile.state;
      entry.state_at = meanwhile.state_at;
    }
    this.entries.delete(doc._id);
    this.entries.set(doc._id, entry);
    if (this.entries.size > MAX_ENTRIES) this.entries.delete(this.entries.keys().next().value!);
    return entry;
  }

  /** A node's document, read together with the other misses waiting when a read starts. */
  private load(nodeId: string): Promise<Loaded> {
    return new Promise<Loaded>((resolve, reject) => {
      const waiters = this.waiting.get(nodeId);
      if (waiters) waiters.push({ resolve, reject });
      else this.waiting.set(nodeId, [{ resolve, reject }]);
      void this.readWaiting();
    });
  }

  /** One read at a time, each taking every miss waiting (up to MAX_IDS_PER_READ), until none waits. */
  private async readWaiting(): Promise<void> {
    if (this.reading) return;
    this.reading = true;
    try {
      while (this.waiting.size > 0) {
        const batch = [...this.waiting].slice(0, MAX_IDS_PER_READ);
        for (const [id] of batch) this.waiting.delete(id);
        const readAt = Date.now();
        this.stats.reads++;
        try {
          const docs = await this.nodes.findAuth(batch.map(([id]) => id));
          const byId = new Map(docs.map((d) => [d._id, d]));
          this.replayFrom(readAt);
          for (const [id, waiters] of batch) for (const w of waiters) w.resolve({ doc: byId.get(id) ?? null, readAt });
        } catch (err) {
          for (const [, waiters] of batch) for (const w of waiters) w.reject(err);
        }
      }
    } finally {
      this.reading = false;
    }
  }

  /**
   * Remembers a state this process caused (e.g. it woke an offline node): the node document says so only once the
   * workflow has recorded the change, and reading it (or an older record) meanwhile would make every heartbeat of a
   * waking node signal its workflow again (a mass online would multiply its workflow tasks).
   */
  note(nodeId: string, state: NodeState): void {
    const hit = this.entries.get(nodeId);
    if (hit) {
      hit.state = state;
      hit.state_at = Date.now();
      hit.loaded_at = Date.now();
    }
  }

  /**
   * After a read of node documents that began at `readAt`: the next poll reads the log again from then (minus the
   * margin), and until it has, entries loaded by that read are trusted for NODE_CACHE_TTL_MS only. A poll that ran
   * while the read was in flight skipped the records of nodes not yet held (a removal, a rejection written after
   * the read saw the document); the replay applies them (records apply by their time, so twice is harmless).
   */
  private replayFrom(readAt: number): void {
    this.rewindTo = Math.min(this.rewindTo ?? Infinity, readAt);
    if (this.logCursor > readAt) this.logCursor = readAt;
    if (this.logReadAt >= readAt) this.logReadAt = readAt - 1;
  }

  /**
   * A registration's record makes its node known as of this read (`readAt`): the log's later records apply to it as
   * to any entry. A node whose registration was undone (its removal's record comes later in the same read) is
   * dropped again by that record.
   */
  private learn(r: NodeChangeDocument, readAt: number, removedAt: Map<string, number>): void {
    if (!r.registered || r.state === null) return;
    // Removed after it registered (its removal may sort first: the hosts' clocks that stamped state_at differ).
    if ((removedAt.get(r.node_id) ?? -Infinity) >= r.written_at.getTime()) return;
    this.put(
      {
        _id: r.node_id,
        api_key_hash: r.registered.api_key_hash,
        state: r.state,
        brand: { code: r.registered.brand },
        state_changed_at: r.state_at.toISOString()
      },
      readAt
    );
    this.stats.registered++;
  }

  /** Reads the change log once and applies what it holds; on failure the TTL fallback applies until a read works. */
  async poll(): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    const startedAt = Date.now();
    try {
      // A gap longer than the log keeps (a paused process) may have lost records: start over from the documents.
      if (this.logCursor > 0 && startedAt - this.logCursor > NODE_CHANGES_KEEP_MS - 2 * CLOCK_MARGIN_MS) {
        this.entries.clear();
        this.absent.clear();
        this.logCursor = 0;
        this.logReadAt = 0;
        void this.preload();
      }
      const since = this.logCursor > 0 ? this.logCursor - CLOCK_MARGIN_MS : startedAt - NODE_CHANGES_KEEP_MS;
      const records = await this.nodes.changesSince(new Date(since));
      records.sort(
        (a, b) => a.state_at.getTime() - b.state_at.getTime() || a.written_at.getTime() - b.written_at.getTime()
      );
      this.nodes.index.apply(records, startedAt);
      const removedAt = new Map<string, number>();
      for (const r of records)
        if (r.state === null) removedAt.set(r.node_id, Math.max(removedAt.get(r.node_id) ?? 0, r.written_at.getTime()));
      for (const r of records) {
        const entry = this.entries.get(r.node_id);
        if (!entry) {
          this.learn(r, startedAt, removedAt);
          continue;
        }
        if (r.state === null) {
          this.entries.delete(r.node_id);
          this.stats.changes++;
          continue;
        }
        const at = r.state_at.getTime();
        if (at >= entry.state_at) {
          entry.state = r.state;
          entry.state_at = at;
          this.stats.changes++;
        }
      }
      // Entries loaded before this read began have now seen every change written before it began.
      if (this.rewindTo !== null && since > this.rewindTo - CLOCK_MARGIN_MS) {
        // A read of node documents that began before what this poll read (see replayFrom): read again from there.
        this.logCursor = this.rewindTo;
        this.logReadAt = this.rewindTo - 1;
      } else {
        this.rewindTo = null;
        this.logCursor = startedAt;
        this.logReadAt = startedAt;
      }
    } catch (err) {
      this.onPollError(err);
    } finally {
      this.polling = false;
    }
  }
}
