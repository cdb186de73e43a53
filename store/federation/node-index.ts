/**
 * The node directory's index: every node's number (seq), name, state, brand and declared memory, held in memory by
 * each API process, so the directory's order, filters and counts (GET /a2a/nodes, /api/nodes, /a2a/dashboard,
 * /api/status-data/nodes) cost no read of the nodes: a page then reads only its own node documents, by `_id`.
 *
 * Why: FerretDB serves only `_id` equality (and equality on a GIN-indexed field) from an index. A page read as
 * `countDocuments(filter)` + `find(filter).sort({ seq: 1 }).skip().limit()` read every node document twice, and the
 * dashboard's counts read them all once more (hundreds of ms at 2,000 nodes, seconds at 10,000 on a busy database).
 *
 * Fed by the node cache (node-cache.ts), which every API process runs: its projected scan at start (load) and every
 * read of the node change log (apply; node-change-log.ts, polled every NODE_CHANGES_POLL_MS), so the index lags
 * the node documents by about that poll (1 s). Change records this process writes (a registration it answered) are
 * applied at once (NodeChangeLog.onWritten). A registration's record carries what the index needs; a record of a node the
 * index does not hold (its registration's record was lost, it is best effort) makes it read that node's document
 * by `_id`. Records apply by their state_at, as in the node cache, so one applied twice changes nothing.
 */
import { AppError } from '../../core/errors';
import type { BrandCode, NodeState } from '../../core/federation/vocabulary';
import type { NodeChangeDocument } from './node-change-log';
import type { NodeDocument } from './node-document';

/** What the index holds of a node. */
export interface IndexedNode {
  node_id: string;
  seq: number;
  name: string;
  state: NodeState;
  brand: BrandCode;
  /** The memory the node declared at registration (instance.memory_gb). */
  memory_gb: number | null;
  /** ms of the newest state applied (the document's state_changed_at or a change record's state_at). */
  state_at: number;
  /** ms: start of the read or log poll that last brought this node (see load's `complete`). */
  learned_at: number;
}

/** The fields of a node document the index reads (NODE_INDEX_PROJECTION). */
export type NodeIndexDocument = Pick<NodeDocument, '_id' | 'seq' | 'name' | 'state' | 'state_changed_at'> & {
  brand: { code: BrandCode };
  instance?: { memory_gb?: number | null } | null;
};

export const NODE_INDEX_PROJECTION = {
  seq: 1,
  name: 1,
  state: 1,
  'brand.code': 1,
  'instance.memory_gb': 1,
  state_changed_at: 1
} as const;

/** The directory's filters. */
export interface NodeFilter {
  state?: NodeState;
  brand?: BrandCode;
}

/** Counts by state and by brand, and the memory the nodes that are not rejected declared (the dashboard's). */
export interface NodeAggregates {
  byState: Record<string, number>;
  byBrand: Record<string, number>;
  memoryGb: number;
  total: number;
}

/** Records written this long before a read began may still be missing from what it found (hosts' clocks differ). */
const CLOCK_MARGIN_MS = 5000;
/** A removal is remembered this long, so that a document read before it does not bring its node back. */
const REMOVED_KEEP_MS = 240_000;
/** Node documents read at once for records of nodes the index does not hold. */
const RESOLVES_IN_FLIGHT = 8;
/** Reads of such a document before it waits for the next record naming the node (1 s, 2 s, 4 s, … apart). */
const RESOLVE_ATTEMPTS = 5;

export function indexedNode(doc: NodeIndexDocument, learnedAt: number): IndexedNode {
  return {
    node_id: doc._id,
    seq: doc.seq,
    name: doc.name,
    state: doc.state,
    brand: doc.brand.code,
    memory_gb: doc.instance?.memory_gb ?? null,
    state_at: Date.parse(doc.state_changed_at) || 0,
    learned_at: learnedAt
  };
}

export class NodeIndex {
  private readonly byId = new Map<string, IndexedNode>();
  /** Every node by seq; rebuilt from byId when `sorted` is false (after a removal or an out-of-order insert). */
  private ordered: IndexedNode[] = [];
  private sorted = true;
  /** Node id → written_at (ms) of its newest removal record. */
  private readonly removed = new Map<string, number>();
  /** Records of nodes whose document is being read (applied after it), by node id. */
  private readonly resolving = new Map<string, NodeChangeDocument[]>();
  private readonly toResolve: string[] = [];
  /** Failed reads of a node's document so far (tried again, RESOLVE_ATTEMPTS in all). */
  private readonly resolveFailures = new Map<string, number>();
  private resolvesInFlight = 0;
  private loadedOnce = false;
  /** A complete load is under way: records of unknown nodes wait for it (its replay of the log brings them). */
  private loading = 0;
  private loader: (() => Promise<void>) | null = null;

  /** `read`: reads one node's document by `_id` (null when it has none). */
  constructor(private readonly read: (nodeId: string) => Promise<NodeIndexDocument | null>) {}

  /** Who loads the index (the node cache's preload); ready() calls it when no load has succeeded yet. */
  attachLoader(loader: () => Promise<void>): void {
    this.loader = loader;
  }

  /** Whether a complete load has succeeded (the index then holds every node, up to the log's lag). */
  get loaded(): boolean {
    return this.loadedOnce;
  }

  get size(): number {
    return this.byId.size;
  }

  /**
   * Resolves once the index holds every node: loads it (through its loader) when no load has succeeded yet; 503 when
   * the nodes cannot be read (the database is away), tried again at the next call.
   */
  async ready(): Promise<void> {
    if (this.loadedOnce) return;
    if (!this.loader) throw new Error('the node index is not loaded in this process (no node cache follows the log)');
    await this.loader();
    if (!this.loadedOnce)
      throw new AppError(
        'unavailable',
        'The node directory could not be loaded (the nodes could not be read); retry later'
      );
  }

  /** A complete load starts (see load). */
  beginLoad(): void {
    this.loading++;
  }

  /**
   * The nodes a read that began at `readAt` found. `complete`: every node (a preload); nodes the index holds that it
   * did not find are dropped, unless the log brought them after the read began. A node whose state a record changed
   * later than its document keeps that state; a node removed since shortly before the read is not brought back.
   * The log is read again from `readAt` (the node cache's replay), which applies what changed while it ran.
   */
  load(docs: NodeIndexDocument[], readAt: number, complete: boolean): void {
    const found = new Set<string>();
    for (const doc of docs) {
      found.add(doc._id);
      this.put(indexedNode(doc, readAt), readAt);
    }
    if (complete) {
      for (const [id, node] of this.byId)
        if (!found.has(id) && node.learned_at <= readAt) {
          this.byId.delete(id);
          this.sorted = false;
        }
      this.loadedOnce = true;
    }
  }

  /** A complete load ended (successful or not). */
  endLoad(): void {
    this.loading = Math.max(0, this.loading - 1);
  }

  /** Holds a node as read at `readAt`, unless it was removed since shortly before; a newer state applied wins. */
  private put(node: IndexedNode, readAt: number): void {
    if ((this.removed.get(node.node_id) ?? -Infinity) >= readAt - CLOCK_MARGIN_MS) return;
    const held = this.byId.get(node.node_id);
    if (held) {
      if (held.state_at > node.state_at) {
        node.state = held.state;
        node.state_at = held.state_at;
      }
      if (held.seq !== node.seq) this.sorted = false;
      Object.assign(held, node);
      return;
    }
    this.byId.set(node.node_id, node);
    if (this.sorted) {
      const last = this.ordered[this.ordered.length - 1];
      if (!last || last.seq < node.seq) this.ordered.push(node);
      else this.sorted = false;
    }
  }

  /**
   * Change records from a read of the log that began at `readAt`, sorted by state_at (as the node cache applies
   * them). A record of a node the index does not hold either registers it (a registration's record carries its
   * fields) or has its document read (after a complete load only: during one, the load and its replay bring it).
   */
  apply(records: NodeChangeDocument[], readAt: number): void {
    const removedIn = new Map<string, number>();
    for (const r of records)
      if (r.state === null) removedIn.set(r.node_id, Math.max(removedIn.get(r.node_id) ?? 0, r.written_at.getTime()));
    for (const r of records) {
      const waiting = this.resolving.get(r.node_id);
      if (waiting) waiting.push(r);
      if (r.state === null) {
        this.remove(r.node_id, r.written_at.getTime());
        continue;
      }
      const held = this.byId.get(r.node_id);
      if (held) {
        const at = r.state_at.getTime();
        if (at >= held.state_at) {
          held.state = r.state;
          held.state_at = at;
        }
        continue;
      }
      // Removed after this record was written (a removal may sort first: clocks differ): nothing to hold.
      const removedAt = Math.max(removedIn.get(r.node_id) ?? -Infinity, this.removed.get(r.node_id) ?? -Infinity);
      if (removedAt >= r.written_at.getTime()) continue;
      const reg = r.registered;
      if (reg?.seq !== undefined && reg.name !== undefined) {
        this.put(
          {
            node_id: r.node_id,
            seq: reg.seq,
            name: reg.name,
            state: r.state,
            brand: reg.brand as BrandCode,
            memory_gb: reg.memory_gb ?? null,
            state_at: r.state_at.getTime(),
            learned_at: readAt
          },
          readAt
        );
        continue;
      }
      if (this.loadedOnce && this.loading === 0 && !waiting) this.resolve(r.node_id, r);
    }
    this.pruneRemoved(readAt);
  }

  private remove(nodeId: string, writtenAt: number): void {
    this.removed.set(nodeId, Math.max(this.removed.get(nodeId) ?? 0, writtenAt));
    if (this.byId.delete(nodeId)) this.sorted = false;
  }

  private pruneRemoved(now: number): void {
    if (this.removed.size < 1000) return;
    for (const [id, at] of this.removed) if (now - at > REMOVED_KEEP_MS) this.removed.delete(id);
  }

  /** Reads a node's document (a record named it and the index does not hold it), then applies its records since. */
  private resolve(nodeId: string, first: NodeChangeDocument): void {
    this.resolving.set(nodeId, [first]);
    this.toResolve.push(nodeId);
    this.resolveNext();
  }

  private resolveNext(): void {
    while (this.resolvesInFlight < RESOLVES_IN_FLIGHT && this.toResolve.length > 0) {
      const nodeId = this.toResolve.shift()!;
      this.resolvesInFlight++;
      const readAt = Date.now();
      void this.read(nodeId)
        .then(
          (doc) => {
            this.resolveFailures.delete(nodeId);
            if (doc) this.put(indexedNode(doc, readAt), readAt);
            // Records that came while it was read (or before, in the same poll), by their state_at.
            const records = this.resolving.get(nodeId) ?? [];
            this.resolving.delete(nodeId);
            if (doc && records.length > 0) this.apply(records, readAt);
          },
          () => {
            // Tried again shortly (the database was away), then when the next record names it.
            const failures = (this.resolveFailures.get(nodeId) ?? 0) + 1;
            if (failures >= RESOLVE_ATTEMPTS) {
              this.resolveFailures.delete(nodeId);
              this.resolving.delete(nodeId);
              return;
            }
            this.resolveFailures.set(nodeId, failures);
            setTimeout(
              () => {
                this.toResolve.push(nodeId);
                this.resolveNext();
              },
              1000 * 2 ** (failures - 1)
            ).unref();
          }
        )
        .finally(() => {
          this.resolvesInFlight--;
          this.resolveNext();
        });
    }
  }

  /** Resolves once no node document read for a record is waiting or in flight (tests). */
  async settled(): Promise<void> {
    while (this.resolving.size > 0) await new Promise((r) => setTimeout(r, 5));
  }

  /** Every node, by seq. */
  private inOrder(): IndexedNode[] {
    if (!this.sorted) {
      this.ordered = [...this.byId.values()].sort((a, b) => a.seq - b.seq);
      this.sorted = true;
    }
    return this.ordered;
  }

  /** The indexed node, or undefined when the index does not hold it. */
  get(nodeId: string): IndexedNode | undefined {
    return this.byId.get(nodeId);
  }

  /** One page of the nodes matching `filter`, by seq, and how many match. */
  page(filter: NodeFilter, offset: number, limit: number): { total: number; nodes: IndexedNode[] } {
    const nodes: IndexedNode[] = [];
    let total = 0;
    for (const node of this.inOrder()) {
      if ((filter.state && node.state !== filter.state) || (filter.brand && node.brand !== filter.brand)) continue;
      if (total >= offset && nodes.length < limit) nodes.push(node);
      total++;
    }
    return { total, nodes };
  }

  /** Counts by state and brand, and the memory declared by the nodes that are not rejected. */
  aggregates(): NodeAggregates {
    const byState: Record<string, number> = {};
    const byBrand: Record<string, number> = {};
    let memoryGb = 0;
    for (const node of this.byId.values()) {
      byState[node.state] = (byState[node.state] ?? 0) + 1;
      byBrand[node.brand] = (byBrand[node.brand] ?? 0) + 1;
      if (node.state !== 'rejected') memoryGb += node.memory_gb ?? 0;
    }
    return { byState, byBrand, memoryGb, total: this.byId.size };
  }
}
