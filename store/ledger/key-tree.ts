/**
 * The key tree: any key prefix answered by a few `_id` reads (docs/ledger.md#key-prefixes).
 *
 * `GET /api/truth?key=<prefix>` returns the oldest entries (at most 200) whose key starts with the prefix, any prefix
 * (not only whole dotted segments). MongoDB would serve that from an index on `key` with a regex and a sort; FerretDB
 * reads the whole ledger for it (40 s at 100,000 entries). So the hub keeps the ledger's distinct keys as a radix
 * tree (a trie whose chains without branches are one node) in `ledger_key_tree`, two kinds of documents:
 *   - a node, `_id` = '/' + its prefix, `s`: the oldest NODE_SEQS seqs of the entries whose key starts with the
 *     prefix, ascending. There is a node at every key and at every branch.
 *   - an edge, `_id` = '>' + a node's prefix + the next code point of one of its children, `p`: that child's prefix.
 *     The edge's `_id` is the child's prefix cut one code point after its parent's, so a walk finds the child on a
 *     prefix's next code point by one `_id` read, whatever the number of children (a node holding its children
 *     would grow with them: a million distinct keys under one prefix make a document past the 16 MiB limit, and
 *     every new key would rewrite it).
 *   - a key's versions (its truth entries, as the memory gateway counts them): its node's `v` (how many) and `lv`
 *     (the newest's seq), and their seqs in order, field `p<i>` of `=<key>#<chunk>` for version chunk·256 + i + 1
 *     (the chunk, digits, after the last '#'), so a key's newest versions and their numbers are a few `_id` reads
 *     however many it has.
 * The entries starting with a prefix P are those under the first node whose prefix starts with P (no key ends and
 * no branch starts between P and that node), so a read follows edges from the root to that node and looks its seqs
 * up. Since the ledger only grows, a node's `s` changes only while it holds fewer than NODE_SEQS seqs: the hot
 * prefixes are full early and no longer written; a new key inserts its node and its edge.
 *
 * The tree is written by one process at a time (key-tree-indexer.ts), in seq order, after the entries are durable
 * and published in a head record, and it says how far it goes in INDEXED_ID (its `size`). A node may hold seqs past
 * that (a batch written, its record not yet): readers drop them and read the entries after it by `_id` (the tail).
 * That is exact because `s` is always the oldest seqs of the node's subtree: any entry up to the recorded size under
 * the node that is not in a full `s` is newer than all of `s`.
 *
 * A batch writes version chunks before the nodes counting them, its nodes before its edges, and new edges before changed ones (an edge moved to a node a split
 * created, whose own edges are new), so a reader never follows an edge to a document not written yet; a reader
 * that follows an edge before it moved reaches a node that still holds every seq up to the size it read. Every
 * write sets a document to what the seqs applied so far make it, so a batch written again after a crash or a lease
 * takeover (from the recorded size) ends in the same documents.
 */
import { MongoBulkWriteError, type Collection, type Db, type Document } from 'mongodb';
import { writeInCommands } from '../mongo';

export const LEDGER_KEY_TREE_COLLECTION = 'ledger_key_tree';
/** Seqs a node keeps: the oldest of its subtree, as many as a prefix read returns at most. */
export const NODE_SEQS = 200;
/**
 * How far the tree goes. Named for the layout: the first layout (children listed in their parent, before edges) kept
 * `#indexed`; a process of this version drops that tree and builds this one (KeyTreeWriter.dropEarlierLayout), while
 * a process of the earlier version, finding no `#indexed`, reads prefixes by the regex query.
 */
const INDEXED_ID = '#indexed:edges';
const EARLIER_INDEXED_ID = '#indexed';
/** New documents inserted by one command, at most. */
const INSERTS_PER_COMMAND = 500;

/** An entry as the tree takes it: its seq, its key as stored, whether it is a truth (a version of its key). */
export interface KeyTreeEntry {
  seq: number;
  key: string;
  truth: boolean;
}

export interface KeyTreeDocument {
  _id: string;
  /** Node: the oldest seqs of its subtree, ascending, at most NODE_SEQS. */
  s?: number[];
  /** Node at a key: how many of its entries are truths (its versions), and the newest one's seq. */
  v?: number;
  lv?: number;
  /** Edge: the prefix of the child it leads to. */
  p?: string;
  /** INDEXED_ID: every entry up to this seq is in the tree. */
  size?: number;
  /** Lease records (key-tree-indexer.ts). */
  holder?: string;
  renewed_at?: string;
}

const nodeId = (prefix: string) => `/${prefix}`;
/** Versions per chunk document. */
export const VERSION_CHUNK = 256;
/** The chunk holding version `ordinal` (from 1) of `key`, and its field there. */
const versionChunkId = (key: string, ordinal: number) => `=${key}#${Math.floor((ordinal - 1) / VERSION_CHUNK)}`;
const versionField = (ordinal: number) => `p${(ordinal - 1) % VERSION_CHUNK}`;
/** The edge from the node at `parent` to its child whose prefix continues with the code point `next`. */
const edgeId = (parent: string, next: string) => `>${parent}${next}`;

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

/** Reads of the tree (any process). */
export class KeyTree {
  readonly nodes: Collection<KeyTreeDocument>;
  /** The same collection, for the version chunks' `p<i>` fields. */
  readonly raw: Collection<Document>;

  constructor(db: Db) {
    this.nodes = db.collection<KeyTreeDocument>(LEDGER_KEY_TREE_COLLECTION);
    this.raw = db.collection(LEDGER_KEY_TREE_COLLECTION);
  }

  /** How far the tree goes: every entry up to this seq is in it; null when it was never built. */
  async indexedSize(): Promise<number | null> {
    const doc = await this.nodes.findOne({ _id: INDEXED_ID });
    return typeof doc?.size === 'number' ? doc.size : null;
  }

  /**
   * The oldest seqs (at most NODE_SEQS, ascending, possibly some past the indexed size) of the entries whose key
   * starts with `prefix` (well-formed); null when the node an edge leads to is missing, or for a prefix holding U+0000
   * (the caller reads otherwise).
   */
  async oldest(prefix: string): Promise<number[] | null> {
    // PostgreSQL's jsonb holds no U+0000, so the embedded store can look no such `_id` up (nor store such a key).
    if (prefix.includes('\u0000')) return null;
    let at = '';
    while (!at.startsWith(prefix)) {
      // `at` is a proper prefix of `prefix`: follow the edge on prefix's next code point.
      const edge = await this.nodes.findOne({ _id: edgeId(at, codePointAt(prefix, at.length)) });
      const child = edge?.p;
      if (child === undefined || !(child.startsWith(prefix) || prefix.startsWith(child))) return [];
      at = child;
    }
    const node = await this.nodes.findOne({ _id: nodeId(at) });
    if (node) return node.s ?? [];
    return at === '' ? [] : null;
  }

  /**
   * The versions of `key` (well-formed, without U+0000) the tree has counted: how many, possibly some past the
   * indexed size, and a reader of their seqs by ordinal (version chunks read once each).
   */
  async versions(key: string): Promise<{ count: number; seqOf: (ordinal: number) => Promise<number> }> {
    const node = await this.nodes.findOne({ _id: nodeId(key) });
    const chunks = new Map<string, Promise<Document | null>>();
    const seqOf = async (ordinal: number) => {
      const id = versionChunkId(key, ordinal);
      if (!chunks.has(id)) chunks.set(id, this.raw.findOne({ _id: id as unknown as Document['_id'] }));
      const seq = (await chunks.get(id)!)?.[versionField(ordinal)];
      if (typeof seq !== 'number')
        throw new Error(`ledger key tree: version ${ordinal} of ${JSON.stringify(key)} is missing`);
      return seq;
    };
    return { count: node?.v ?? 0, seqOf };
  }
}

/**
 * A node as the indexer holds it. `seqs` null: a full node whose seqs were dropped from memory (`last` kept).
 * `edges`: its edges known so far, by next code point (null: known to be absent); `allEdges`: no other edge exists
 * (a node this process created).
 */
interface HeldNode {
  prefix: string;
  edges: Map<string, string | null>;
  allEdges: boolean;
  seqs: number[] | null;
  last: number;
  dirtySeqs: boolean;
  /** Versions (truths with exactly this key) and the newest one's seq. */
  versions: number;
  lastVersion: number;
  dirtyVersions: boolean;
  /** Created by this batch, not written yet. */
  created: boolean;
}

/** A document to write: its `_id` and the fields to set (an insert when `created`, else an update). */
interface DirtyDocument {
  fields: Record<string, unknown>;
  created: boolean;
}

/** An edge to write: `created` when no document for it existed before this batch. */
interface DirtyEdge {
  child: string;
  created: boolean;
}

/**
 * The writer's side (one process at a time: key-tree-indexer.ts): applies entries in seq order to nodes held in
 * memory (read on first use, at most `maxHeld` kept between batches), then writes the documents that changed.
 */
export class KeyTreeWriter {
  private readonly held = new Map<string, HeldNode>();
  private readonly dirtyEdges = new Map<string, DirtyEdge>();
  private readonly dirtyChunks = new Map<string, DirtyDocument>();

  constructor(
    private readonly tree: KeyTree,
    private readonly maxHeld = 50_000
  ) {}

  /** Forgets every node held (after losing the lease: another process may have written since). */
  forget(): void {
    this.held.clear();
    this.dirtyEdges.clear();
    this.dirtyChunks.clear();
  }

  /**
   * Drops a tree of the earlier layout (nodes listing their children), whose `#indexed` says it exists: its nodes
   * first, then the record, so a reader of that version never meets a record without its nodes. Returns whether
   * there was one.
   */
  async dropEarlierLayout(): Promise<boolean> {
    if (!(await this.tree.nodes.findOne({ _id: EARLIER_INDEXED_ID }))) return false;
    await this.tree.nodes.deleteMany({ c: { $exists: true } });
    await this.tree.nodes.deleteOne({ _id: EARLIER_INDEXED_ID });
    this.forget();
    return true;
  }

  /** Adds entries (in seq order, keys as stored) to the tree and writes what changed; then the indexed size. */
  async apply(entries: KeyTreeEntry[], indexedSize: number): Promise<void> {
    try {
      for (const e of entries) {
        const node = await this.insert(e.key, e.seq);
        if (e.truth) this.addVersion(node, e.seq);
      }
      await this.write();
      await this.tree.nodes.updateOne({ _id: INDEXED_ID }, { $set: { size: indexedSize } }, { upsert: true });
    } catch (err) {
      this.forget(); // what is held may differ from what was written
      throw err;
    }
    this.trim();
  }

  /** Adds the seq to every node on its key's path, making the nodes it needs; returns the key's node. */
  private async insert(key: string, seq: number): Promise<HeldNode> {
    let node = await this.node('', true);
    for (;;) {
      await this.addSeq(node, seq);
      if (node.prefix === key) return node;
      const next = codePointAt(key, node.prefix.length);
      const childPrefix = await this.edge(node, next);
      if (childPrefix === null) {
        const leaf = this.create(key, [seq]);
        this.setEdge(node, next, key);
        return leaf;
      }
      const common = commonPrefix(childPrefix, key);
      if (common === childPrefix) {
        node = await this.node(childPrefix, false);
        continue;
      }
      // The key leaves the child's edge at `common`: a node there takes the child, and the key below it.
      const child = await this.node(childPrefix, false);
      const mid = this.create(common, oldestOf([...(await this.seqsOf(child)), seq]));
      this.setEdge(mid, codePointAt(childPrefix, common.length), childPrefix);
      this.setEdge(node, next, common);
      if (common === key) return mid;
      const leaf = this.create(key, [seq]);
      this.setEdge(mid, codePointAt(key, common.length), key);
      return leaf;
    }
  }

  /** Counts a truth as its key's next version (once: a seq at or before the newest version is counted already). */
  private addVersion(node: HeldNode, seq: number): void {
    if (seq <= node.lastVersion) return;
    const ordinal = ++node.versions;
    node.lastVersion = seq;
    node.dirtyVersions = true;
    const id = versionChunkId(node.prefix, ordinal);
    let chunk = this.dirtyChunks.get(id);
    // A chunk whose first version this batch sets has no document yet (but after a crash: see insertNew).
    if (!chunk) this.dirtyChunks.set(id, (chunk = { fields: {}, created: (ordinal - 1) % VERSION_CHUNK === 0 }));
    chunk.fields[versionField(ordinal)] = seq;
  }

  private create(prefix: string, seqs: number[]): HeldNode {
    const node: HeldNode = {
      prefix,
      edges: new Map(),
      allEdges: true,
      seqs,
      last: seqs[seqs.length - 1] ?? 0,
      dirtySeqs: true,
      versions: 0,
      lastVersion: 0,
      dirtyVersions: false,
      created: true
    };
    this.held.set(prefix, node);
    return node;
  }

  /** The prefix of the child of `node` whose prefix continues with `next`, or null: held, or read once. */
  private async edge(node: HeldNode, next: string): Promise<string | null> {
    const known = node.edges.get(next);
    if (known !== undefined) return known;
    if (node.allEdges) return null;
    const doc = await this.tree.nodes.findOne({ _id: edgeId(node.prefix, next) });
    const child = doc?.p ?? null;
    node.edges.set(next, child);
    return child;
  }

  private setEdge(node: HeldNode, next: string, child: string): void {
    const id = edgeId(node.prefix, next);
    // No document for it yet: none known (a node created here, or one read as absent), or one this batch creates.
    const created = this.dirtyEdges.get(id)?.created ?? (node.edges.get(next) ?? null) === null;
    node.edges.set(next, child);
    this.dirtyEdges.set(id, { child, created });
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
      if (orCreate) return this.create(prefix, []);
      throw new Error(`ledger key tree: node ${JSON.stringify(prefix)} is missing`);
    }
    const seqs = doc.s ?? [];
    const node: HeldNode = {
      prefix,
      edges: new Map(),
      allEdges: false,
      seqs,
      last: seqs[seqs.length - 1] ?? 0,
      dirtySeqs: false,
      versions: doc.v ?? 0,
      lastVersion: doc.lv ?? 0,
      dirtyVersions: false,
      created: false
    };
    this.held.set(prefix, node);
    return node;
  }

  /**
   * Writes what changed so that a reader never follows an edge or a count to a document not written yet: the version
   * chunks, then the new nodes (inserted, many per command; one already there from a batch written before a crash is
   * updated instead) and the nodes whose seqs or versions changed, then the new edges (which lead only to nodes),
   * then the edges that moved (to a node a split created, whose own edges are new).
   */
  private async write(): Promise<void> {
    await this.writeAll([...this.dirtyChunks].map(([_id, c]) => ({ _id, ...c })));
    const dirty = [...this.held.values()].filter((n) => n.dirtySeqs || n.dirtyVersions);
    await this.writeAll(
      dirty.map((n) => {
        const fields: Record<string, unknown> = {};
        if ((n.dirtySeqs || n.created) && n.seqs !== null) fields.s = n.seqs;
        if (n.dirtyVersions) Object.assign(fields, { v: n.versions, lv: n.lastVersion });
        return { _id: nodeId(n.prefix), fields, created: n.created };
      })
    );
    const edges = [...this.dirtyEdges].map(([_id, e]) => ({ _id, fields: { p: e.child }, created: e.created }));
    await this.writeAll(edges.filter((e) => e.created));
    await this.writeAll(edges.filter((e) => !e.created));
    for (const n of dirty) n.dirtySeqs = n.dirtyVersions = n.created = false;
    this.dirtyEdges.clear();
    this.dirtyChunks.clear();
  }

  /** Inserts the created documents, then sets the fields of the others (and of created ones that were there). */
  private async writeAll(docs: ({ _id: string } & DirtyDocument)[]): Promise<void> {
    const there = await this.insertNew(docs.filter((d) => d.created).map((d) => ({ _id: d._id, ...d.fields })));
    await this.updateExisting([...docs.filter((d) => !d.created).map((d) => ({ _id: d._id, ...d.fields })), ...there]);
  }

  /** Inserts new documents; returns those that were there already (written by a batch that did not record its end). */
  private async insertNew(docs: Document[]): Promise<Document[]> {
    const there: Document[] = [];
    for (let at = 0; at < docs.length; at += INSERTS_PER_COMMAND) {
      const chunk = docs.slice(at, at + INSERTS_PER_COMMAND);
      try {
        await this.tree.raw.insertMany(chunk, { ordered: false });
      } catch (err) {
        if (!(err instanceof MongoBulkWriteError)) throw err;
        const errors = Array.isArray(err.writeErrors) ? err.writeErrors : [err.writeErrors];
        if (!errors.every((e) => e.code === 11000)) throw err;
        for (const e of errors) there.push(chunk[e.index]!);
      }
    }
    return there;
  }

  /** Sets documents' fields, in commands of a few statements (writeInCommands: FerretDB 1.24's connections). */
  private async updateExisting(docs: Document[]): Promise<void> {
    await writeInCommands(
      this.tree.raw,
      docs.map(({ _id, ...$set }) => ({ updateOne: { filter: { _id }, update: { $set }, upsert: true } }))
    );
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
