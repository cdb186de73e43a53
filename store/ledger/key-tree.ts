/**
 * The key tree: any key prefix answered by a few `_id` reads (docs/ledger.md#key-prefixes).
 *
 * `GET /api/truth?key=<prefix>` returns the oldest entries (at most 200) whose key starts with the prefix, any prefix
 * (not only whole dotted segments). MongoDB would serve that from an index on `key` with a regex and a sort; FerretDB
 * reads the whole ledger for it (40 s at 100,000 entries). So the hub keeps the ledger's distinct keys as a radix
 * tree (a trie whose chains without branches are one node), one document per node in `ledger_key_tree`, addressed
 * by `_id` = '/' + the node's prefix, holding:
 *   - `c`: its children's prefixes (each starts with this prefix and the first code points of two children differ);
 *   - `s`: the oldest NODE_SEQS seqs of the entries whose key starts with this prefix, ascending.
 * There is a node at every key and at every branch. The entries starting with a prefix P are those under the first
 * node whose prefix starts with P (no key ends and no branch starts between P and that node), so a read walks from
 * the root to that node (one `_id` read per branch, comparing children in memory) and looks the seqs up. Since the
 * ledger only grows, a node's `s` changes only while it holds fewer than NODE_SEQS seqs; the hot prefixes are full
 * early and no longer written.
 *
 * The tree is written by one process at a time (key-tree-indexer.ts), in seq order, after the entries are durable
 * and published in a head record, and it says how far it goes in `#indexed` (its `size`). A node may hold seqs past
 * `#indexed` (a batch written, its record not yet): readers drop them and read the entries after `#indexed` by
 * `_id` (the tail). That is exact because `s` is always the oldest seqs of the node's subtree: any entry up to
 * `#indexed` under the node that is not in a full `s` is newer than all of `s`.
 *
 * A batch's nodes are written children before parents (longer prefixes first), so a reader that sees a parent's new
 * child sees the child; a reader that sees the old parent reaches a node that still holds every seq up to the
 * `#indexed` it read. Every write sets a node to what it must be after the seqs applied so far, so a batch written
 * again after a crash or a lease takeover (from the last `#indexed`) ends in the same documents.
 */
import { MongoBulkWriteError, type AnyBulkWriteOperation, type Collection, type Db } from 'mongodb';

export const LEDGER_KEY_TREE_COLLECTION = 'ledger_key_tree';
/** Seqs a node keeps: the oldest of its subtree, as many as a prefix read returns at most. */
export const NODE_SEQS = 200;
const INDEXED_ID = '#indexed';
/** Node updates sent in one command, at most, and commands at once (see updateExisting). */
const WRITES_PER_COMMAND = 8;
const UPDATE_COMMANDS = 4;
/** New nodes inserted by one command, at most. */
const INSERTS_PER_COMMAND = 500;

export interface KeyTreeDocument {
  _id: string;
  /** Node: its children's prefixes. */
  c?: string[];
  /** Node: the oldest seqs of its subtree, ascending, at most NODE_SEQS. */
  s?: number[];
  /** `#indexed`: every entry up to this seq is in the tree. */
  size?: number;
  /** Lease records (key-tree-indexer.ts). */
  holder?: string;
  renewed_at?: string;
}

const nodeId = (prefix: string) => `/${prefix}`;

/**
 * A string as the database stores it: a lone UTF-16 surrogate (half of an astral character) becomes U+FFFD, as the
 * driver's UTF-8 encoding makes it. Keys are read back in this form, so prefixes are compared in it too.
 */
export function wellFormed(s: string): string {
  return s.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD');
}

/** The code point of `s` starting at UTF-16 index `at`, as a string. */
const codePointAt = (s: string, at: number) => String.fromCodePoint(s.codePointAt(at)!);

/** The longest common prefix of two well-formed strings that ends on a code point boundary. */
function commonPrefix(a: string, b: string): string {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  // Never split a surrogate pair: back off from a common high surrogate whose low half differs.
  if (i > 0 && i < n && a.charCodeAt(i - 1) >= 0xd800 && a.charCodeAt(i - 1) <= 0xdbff) i--;
  return a.slice(0, i);
}

/** The child of a node (prefix `at` characters long) whose first code point after it is that of `s` there. */
const childFor = (children: string[], s: string, at: number): string | undefined => {
  const next = codePointAt(s, at);
  return children.find((c) => c.startsWith(next, at));
};

/** Reads of the tree (any process). */
export class KeyTree {
  readonly nodes: Collection<KeyTreeDocument>;

  constructor(db: Db) {
    this.nodes = db.collection<KeyTreeDocument>(LEDGER_KEY_TREE_COLLECTION);
  }

  /** How far the tree goes: every entry up to this seq is in it; null when it was never built. */
  async indexedSize(): Promise<number | null> {
    const doc = await this.nodes.findOne({ _id: INDEXED_ID });
    return typeof doc?.size === 'number' ? doc.size : null;
  }

  /**
   * The oldest seqs (at most NODE_SEQS, ascending, possibly some past `#indexed`) of the entries whose key starts
   * with `prefix` (well-formed); null when the tree has no root yet or a node is missing (the caller reads otherwise).
   */
  async oldest(prefix: string): Promise<number[] | null> {
    let node = await this.nodes.findOne({ _id: nodeId('') });
    if (!node) return null;
    let at = '';
    for (;;) {
      if (at.startsWith(prefix)) return node.s ?? [];
      // `at` is a proper prefix of `prefix`: follow the child on prefix's next code point.
      const child = childFor(node.c ?? [], prefix, at.length);
      if (child === undefined || !(child.startsWith(prefix) || prefix.startsWith(child))) return [];
      node = await this.nodes.findOne({ _id: nodeId(child) });
      if (!node) return null;
      at = child;
    }
  }
}

/** A node as the indexer holds it. `seqs` null: a full node whose seqs were dropped from memory (`last` kept). */
interface HeldNode {
  prefix: string;
  children: string[];
  seqs: number[] | null;
  last: number;
  dirtyChildren: boolean;
  dirtySeqs: boolean;
  /** Created by this batch, not written yet. */
  created: boolean;
}

/**
 * The writer's side (one process at a time: key-tree-indexer.ts): applies entries in seq order to nodes held in
 * memory (read on first use, at most `maxHeld` kept between batches), then writes the nodes that changed.
 */
export class KeyTreeWriter {
  private readonly held = new Map<string, HeldNode>();

  constructor(
    private readonly tree: KeyTree,
    private readonly maxHeld = 50_000
  ) {}

  /** Forgets every node held (after losing the lease: another process may have written since). */
  forget(): void {
    this.held.clear();
  }

  /** Adds entries (in seq order, keys as stored) to the tree and writes the changed nodes; then `#indexed`. */
  async apply(entries: { seq: number; key: string }[], indexedSize: number): Promise<void> {
    try {
      for (const e of entries) await this.insert(e.key, e.seq);
      await this.write();
      await this.tree.nodes.updateOne({ _id: INDEXED_ID }, { $set: { size: indexedSize } }, { upsert: true });
    } catch (err) {
      this.forget(); // what is held may differ from what was written
      throw err;
    }
    this.trim();
  }

  private async insert(key: string, seq: number): Promise<void> {
    let node = await this.node('', true);
    for (;;) {
      await this.addSeq(node, seq);
      if (node.prefix === key) return;
      const at = node.prefix.length;
      const childPrefix = childFor(node.children, key, at);
      if (childPrefix === undefined) {
        this.create(key, [seq], []);
        node.children.push(key);
        node.dirtyChildren = true;
        return;
      }
      const common = commonPrefix(childPrefix, key);
      if (common === childPrefix) {
        node = await this.node(childPrefix, false);
        continue;
      }
      // The key leaves the child's edge at `common`: a node there takes the child, and the key below it.
      const child = await this.node(childPrefix, false);
      const seqs = oldestOf([...(await this.seqsOf(child)), seq]);
      const mid = this.create(common, seqs, [childPrefix]);
      node.children[node.children.indexOf(childPrefix)] = common;
      node.dirtyChildren = true;
      if (common !== key) {
        this.create(key, [seq], []);
        mid.children.push(key);
      }
      return;
    }
  }

  private create(prefix: string, seqs: number[], children: string[]): HeldNode {
    const node: HeldNode = {
      prefix,
      children,
      seqs,
      last: seqs[seqs.length - 1] ?? 0,
      dirtyChildren: true,
      dirtySeqs: true,
      created: true
    };
    this.held.set(prefix, node);
    return node;
  }

  private async addSeq(node: HeldNode, seq: number): Promise<void> {
    // Full, and the seq is newer than all it holds: nothing changes (the common case once a prefix is busy).
    if (node.seqs === null && seq > node.last) return;
    const seqs = await this.seqsOf(node);
    if (seqs.includes(seq) || (seqs.length >= NODE_SEQS && seq > seqs[seqs.length - 1]!)) return;
    node.seqs = oldestOf([...seqs, seq]);
    node.last = node.seqs[node.seqs.length - 1]!;
    node.dirtySeqs = true;
  }

  private async seqsOf(node: HeldNode): Promise<number[]> {
    if (node.seqs === null) {
      const doc = await this.tree.nodes.findOne({ _id: nodeId(node.prefix) });
      node.seqs = doc?.s ?? [];
    }
    return node.seqs;
  }

  /** The node at `prefix`, held or read; a missing root is created when `orCreate`. */
  private async node(prefix: string, orCreate: boolean): Promise<HeldNode> {
    const held = this.held.get(prefix);
    if (held) {
      // Most recently used last (trim drops the first).
      this.held.delete(prefix);
      this.held.set(prefix, held);
      return held;
    }
    const doc = await this.tree.nodes.findOne({ _id: nodeId(prefix) });
    if (!doc) {
      if (orCreate) return this.create(prefix, [], []);
      throw new Error(`ledger key tree: node ${JSON.stringify(prefix)} is missing`);
    }
    const seqs = doc.s ?? [];
    const node: HeldNode = {
      prefix,
      children: doc.c ?? [],
      seqs,
      last: seqs[seqs.length - 1] ?? 0,
      dirtyChildren: false,
      dirtySeqs: false,
      created: false
    };
    this.held.set(prefix, node);
    return node;
  }

  /**
   * Writes the changed nodes so that a reader never follows a pointer to a node not written yet: a new pointer only
   * ever points to a node created in this batch, so first the new nodes (inserted, many per command; a node already
   * there from a batch written before a crash is updated instead) and the nodes whose seqs alone changed, then the
   * nodes that gained children.
   */
  private async write(): Promise<void> {
    const dirty = [...this.held.values()].filter((n) => n.dirtyChildren || n.dirtySeqs);
    if (dirty.length === 0) return;
    const created = dirty.filter((n) => n.created);
    const changed = dirty.filter((n) => !n.created && !n.dirtyChildren);
    const parents = dirty.filter((n) => !n.created && n.dirtyChildren);
    const there = await this.insertNew(created);
    await this.updateExisting([...changed, ...there]);
    await this.updateExisting(parents);
    for (const n of dirty) n.dirtyChildren = n.dirtySeqs = n.created = false;
  }

  /** Inserts new nodes; returns those that were there already (written by a batch that did not record its end). */
  private async insertNew(nodes: HeldNode[]): Promise<HeldNode[]> {
    const there: HeldNode[] = [];
    for (let at = 0; at < nodes.length; at += INSERTS_PER_COMMAND) {
      const chunk = nodes.slice(at, at + INSERTS_PER_COMMAND);
      try {
        await this.tree.nodes.insertMany(
          chunk.map((n) => ({ _id: nodeId(n.prefix), c: n.children, s: n.seqs! })),
          { ordered: false }
        );
      } catch (err) {
        if (!(err instanceof MongoBulkWriteError)) throw err;
        const errors = Array.isArray(err.writeErrors) ? err.writeErrors : [err.writeErrors];
        if (!errors.every((e) => e.code === 11000)) throw err;
        for (const e of errors) there.push(chunk[e.index]!);
      }
    }
    return there;
  }

  /**
   * Sets what changed of existing nodes: WRITES_PER_COMMAND statements per command, UPDATE_COMMANDS commands at
   * once. FerretDB 1.24 holds a PostgreSQL connection for each statement of an update command that matches a
   * document until the whole command ends, so one command updating more nodes than its pool has connections (50)
   * waits for itself forever, and every other request with it.
   */
  private async updateExisting(nodes: HeldNode[]): Promise<void> {
    const commands: AnyBulkWriteOperation<KeyTreeDocument>[][] = [];
    for (let at = 0; at < nodes.length; at += WRITES_PER_COMMAND)
      commands.push(
        nodes.slice(at, at + WRITES_PER_COMMAND).map((n) => {
          const $set: Partial<KeyTreeDocument> = { s: n.seqs ?? undefined, c: n.children };
          if (!(n.dirtyChildren || n.created)) delete $set.c;
          if (!(n.dirtySeqs || n.created) || n.seqs === null) delete $set.s;
          return { updateOne: { filter: { _id: nodeId(n.prefix) }, update: { $set }, upsert: true } };
        })
      );
    let next = 0;
    const run = async () => {
      while (next < commands.length) await this.tree.nodes.bulkWrite(commands[next++]!, { ordered: false });
    };
    await Promise.all(Array.from({ length: Math.min(UPDATE_COMMANDS, commands.length) }, run));
  }

  /** Drops full nodes' seqs from memory, and the least recently used nodes past `maxHeld`. */
  private trim(): void {
    for (const n of this.held.values()) if (n.seqs !== null && n.seqs.length >= NODE_SEQS) n.seqs = null;
    for (const prefix of this.held.keys()) {
      if (this.held.size <= this.maxHeld) break;
      this.held.delete(prefix);
    }
  }
}

/** The oldest NODE_SEQS of `seqs`, ascending, without repeats. */
function oldestOf(seqs: number[]): number[] {
  return [...new Set(seqs)].sort((a, b) => a - b).slice(0, NODE_SEQS);
}
