/**
 * Keeps the key tree (key-tree.ts) up with the ledger: one process at a time reads the entries published since
 * `#indexed:edges` by `_id`, in seq order, adds their keys to the tree and moves `#indexed:edges` on.
 *
 * Every API process runs `start()`; a lease decides which one writes (store/epoch-lease.ts: records `#lease#<epoch>`
 * in the tree's collection, renewed by their holder every poll, taken over when not renewed for `leaseMs`). Before
 * each batch's writes the holder checks that no later epoch exists, and stops when one does, so two processes write
 * at once only if one stalled between that check and its writes for longer than `leaseMs`; each write sets a node
 * to what the entries applied so far make it, and the next batch from `#indexed:edges` repeats them, so even then
 * the tree converges once one holder remains.
 * A lease in the API process rather than a Temporal workflow: the work is a loop over the ledger that any process
 * can resume from `#indexed:edges`, it must run wherever the ledger is read (also where no worker runs), and a workflow
 * would add a history per batch for no durability the tree does not already have.
 *
 * A ledger begun before the tree gets it built the same way, from seq 1; until the tree is near the ledger's head,
 * prefix reads take the query of earlier versions (reads.ts).
 */
import type { Collection, Db } from 'mongodb';
import type { LedgerEntryDocument } from '../../core/ledger/ledger-entry';
import { EpochLease } from '../epoch-lease';
import { LEDGER_COLLECTION } from './entries';
import type { HeadRecords } from './heads';
import { KeyTree, KeyTreeWriter, LEDGER_KEY_TREE_COLLECTION, type KeyTreeEntry } from './key-tree';
import type { PublishedKey } from './positions';

/**
 * Entries applied per batch (read by `_id`, 256 at a time): a node changed by many entries of a batch is written
 * once, so larger batches write less (2,000: 19 s of writes for 20,000 entries of bench:reads' keys; 10,000: 6.5 s).
 */
const BATCH = 10_000;
/** The default scanBacklog. */
const SCAN_BACKLOG = 20_000;

export interface KeyTreeIndexerOptions {
  /** How often the holder looks for new entries, and others for a lease to take. */
  pollMs?: number;
  /** A lease not renewed for this long is taken over. */
  leaseMs?: number;
  /** A backlog larger than this is read by a pass over the collection (see fromScan). */
  scanBacklog?: number;
}

export class KeyTreeIndexer {
  private readonly entries: Collection<LedgerEntryDocument>;
  private readonly writer: KeyTreeWriter;
  private readonly opts: Required<KeyTreeIndexerOptions>;
  private readonly lease: EpochLease;

  constructor(
    db: Db,
    private readonly tree: KeyTree,
    private readonly heads: Pick<HeadRecords, 'newest'>,
    /** Every entry's key and kind in seq order, reading the collection through (LedgerReads.scanKeys). */
    private readonly scanKeys: () => AsyncIterable<{ _id: number; key: string; kind: string }>,
    /** The keys of entries first … last published with the position lists (PositionLists.keys). */
    private readonly publishedKeys: (first: number, last: number) => Promise<Map<number, PublishedKey>>,
    opts: KeyTreeIndexerOptions = {}
  ) {
    this.entries = db.collection<LedgerEntryDocument>(LEDGER_COLLECTION);
    this.writer = new KeyTreeWriter(tree);
    this.opts = { pollMs: 250, leaseMs: 60_000, scanBacklog: SCAN_BACKLOG, ...opts };
    this.lease = new EpochLease(db, LEDGER_KEY_TREE_COLLECTION, '#lease#', this.opts.leaseMs);
  }

  /**
   * Runs the loop until the returned function is called. A failure (the database unreachable, a write refused, an
   * entry missing) is reported to `onError` and tried again from `#indexed:edges`, after 1 s doubling to 60 s while it
   * lasts; prefix reads meanwhile read the tail after `#indexed:edges`, or the regex query once it is far behind.
   */
  start(options: { onError?: (err: unknown) => void } = {}): () => void {
    let stopped = false;
    let timer: NodeJS.Timeout | null = null;
    let failures = 0;
    const tick = async () => {
      // A process without the lease looks for one to take four times per lease period.
      let next = this.opts.leaseMs / 4;
      try {
        if (await this.holdLease()) {
          await this.catchUp({ stop: () => stopped });
          next = this.opts.pollMs;
        }
        failures = 0;
      } catch (err) {
        this.writer.forget();
        next = Math.min(60_000, 1000 * 2 ** failures++);
        if (!stopped) options.onError?.(err);
      }
      if (!stopped) timer = setTimeout(() => void tick(), next);
    };
    timer = setTimeout(() => void tick(), 0);
    return () => {
      stopped = true;
      if (timer) clearTimeout(timer);
    };
  }

  /**
   * Applies every entry published so far (up to the newest head record, or `upTo`), batch by batch; returns the
   * tree's size. The caller holds the lease (start), or knows no other process writes the tree (tests, scripts).
   */
  async catchUp(options: { stop?: () => boolean; upTo?: number } = {}): Promise<number> {
    const stop = options.stop ?? (() => false);
    const size = await this.tree.indexedSize();
    if (size === null) await this.writer.dropEarlierLayout();
    let indexed = size ?? 0;
    const published = (await this.heads.newest())?.size ?? 0;
    const target = Math.min(published, options.upTo ?? published);
    // A pass over the collection only where the writer did not publish the keys (see fromScan): it reads from seq 1
    // whatever the tree has, and a pass cut off (a socket timeout on a loaded database) starts again from seq 1.
    if (target - indexed > this.opts.scanBacklog) {
      const first = Math.min(target, indexed + BATCH);
      if ((await this.publishedKeys(indexed + 1, first)).size < first - indexed)
        indexed = await this.fromScan(indexed, target, stop);
    }
    while (indexed < target && !stop()) {
      const to = Math.min(target, indexed + BATCH);
      const seqs: number[] = [];
      for (let s = indexed + 1; s <= to; s++) seqs.push(s);
      // The keys as the writer published them beside its position lists (one document per 256 entries); an entry
      // whose key was not published is read itself, by `_id` (a `$in` or a range reads every entry on FerretDB).
      const found = await this.publishedKeys(indexed + 1, to);
      const missing = seqs.filter((seq) => !found.has(seq));
      for (let at = 0; at < missing.length; at += 256) {
        const docs = await Promise.all(
          missing.slice(at, at + 256).map((_id) => this.entries.findOne({ _id }, { projection: { key: 1, kind: 1 } }))
        );
        for (const d of docs) if (d) found.set(d._id, { key: d.key, truth: d.kind === 'truth' });
      }
      const batch = seqs.map((seq) => {
        const published = found.get(seq);
        if (published === undefined) throw new Error(`ledger entry ${seq} is missing: the key tree waits for it`);
        return { seq, ...published };
      });
      if (this.lease.held && !(await this.lease.renew())) return indexed;
      await this.writer.apply(batch, to);
      indexed = to;
    }
    return indexed;
  }

  /**
   * A large backlog whose keys the writer did not publish (a ledger begun before it did) read by one pass over the
   * collection instead of an `_id` lookup per entry (about 1 ms each on FerretDB: 17 minutes for a million
   * entries). Returns how far the tree then goes. Where the keys are published (every append and appendBulk since),
   * the batches read them, 256 to a document, however large the backlog: a pass reads the collection from its start
   * (its stored order), so behind by 775,000 of a million entries it read the 225,000 indexed ones again first (5
   * minutes on FerretDB), and every failure of it began the whole pass again.
   */
  private async fromScan(indexed: number, target: number, stop: () => boolean): Promise<number> {
    let batch: KeyTreeEntry[] = [];
    const flush = async (): Promise<boolean> => {
      if (batch.length === 0) return true;
      if (this.lease.held && !(await this.lease.renew())) return false;
      const to = batch[batch.length - 1]!.seq;
      await this.writer.apply(batch, to);
      indexed = to;
      batch = [];
      return true;
    };
    for await (const e of this.scanKeys()) {
      if (e._id <= indexed) continue;
      if (e._id > target || stop()) break;
      const want = indexed + batch.length + 1;
      if (e._id !== want) throw new Error(`ledger entry ${want} is missing: the key tree waits for it`);
      batch.push({ seq: e._id, key: e.key, truth: e.kind === 'truth' });
      if (batch.length >= BATCH && !(await flush())) return indexed;
    }
    await flush();
    return indexed;
  }

  /** Takes or renews the lease; false while another live holder has it. */
  private async holdLease(): Promise<boolean> {
    if (this.lease.held && (await this.lease.renew())) return true;
    // Not holding it since the last batch: another process may have written the tree meanwhile.
    this.writer.forget();
    return this.lease.hold();
  }
}
