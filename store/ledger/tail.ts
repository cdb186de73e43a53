/**
 * The ledger's tail (its size, Merkle frontier and tally after the last entry) and the entries an append builds on
 * it. Every entry carries the Merkle state after it (RFC 6962 hashing, core/ledger/merkle.node.ts): its leaf hash and
 * the root, plus the perfect subtrees it completes, so a proof needs O(log n) reads. The frontier after it (roots of
 * the perfect subtrees of the tree of `seq` leaves) is what the next append builds on: the head records carry it,
 * and where the tail must be read from the entries it is rebuilt from the subtrees they completed (frontierAt;
 * entries of earlier versions stored it too).
 */
import type { Collection, Db } from 'mongodb';
import {
  appendToFrontier,
  fromHex,
  frontierEnds,
  Hash,
  leafHash,
  rootFromFrontier,
  toHex
} from '../../core/ledger/merkle.node';
import { LedgerEntryDocument, LedgerTally, ledgerLeafBytes } from '../../core/ledger/ledger-entry';
import { addToTally, tallyCategory } from '../../core/ledger/tally';
import { findByIds } from '../mongo';
import type { AppendInput } from './append';
import { lastSeqFrom, LEDGER_COLLECTION } from './entries';
import type { HeadRecords, OwnHead } from './heads';

export interface Tail {
  size: number;
  frontier: Hash[];
  /** Null when the entry at `size` has none (a ledger begun before tallies): the entries built on it get none. */
  tally: LedgerTally | null;
}

/** An entry as an append builds it: with the frontier it leaves, which is not stored (LedgerEntryDocument.frontier). */
export type BuiltEntry = LedgerEntryDocument & { frontier: string[] };
/** What is inserted for a built entry. */
export const stored = ({ frontier: _leaves, ...doc }: BuiltEntry): LedgerEntryDocument => doc;

export const tailOf = (doc: BuiltEntry): Tail => ({
  size: doc._id,
  frontier: doc.frontier.map(fromHex),
  tally: doc.tally ?? null
});
export const EMPTY_TAIL: Tail = { size: 0, frontier: [], tally: {} };

export const ownHeadOf = (last: BuiltEntry): OwnHead => ({
  size: last._id,
  root: last.root,
  frontier: last.frontier,
  last_entry_at: last.created_at,
  tally: last.tally ?? null
});

/** What an entry is built from: the caller's input and what the writer adds to it. */
export interface EntryToBuild {
  input: AppendInput;
  eventId: string;
  createdAt: Date;
  idem: string;
  valueJson: string;
}

/** The entries `pending` become, in order, appended to `tail`. */
export function buildEntries(pending: EntryToBuild[], tail: Tail): BuiltEntry[] {
  let size = tail.size;
  let frontier = tail.frontier;
  let tally = tail.tally;
  return pending.map((p) => {
    const seq = size + 1;
    const fields = {
      seq,
      event_id: p.eventId,
      kind: p.input.kind,
      key: p.input.key,
      truth_type: p.input.truth_type ?? null,
      did: p.input.did ?? null,
      created_at: p.createdAt.toISOString()
    };
    const leaf = leafHash(ledgerLeafBytes(fields, p.valueJson));
    const next = appendToFrontier(frontier, size, leaf);
    size = seq;
    frontier = next.frontier;
    if (tally) tally = addToTally(tally, tallyCategory(fields.kind, fields.truth_type));
    return {
      _id: seq,
      ...fields,
      value_json: p.valueJson,
      idem: p.idem,
      leaf_hash: toHex(leaf),
      completed: next.completed.map(toHex),
      frontier: frontier.map(toHex),
      root: toHex(rootFromFrontier(frontier)),
      ...(tally ? { tally } : {})
    };
  });
}

/** Reads the tail of one ledger from its head records and, where they do not cover it, its entries. */
export class TailReader {
  private readonly entries: Collection<LedgerEntryDocument>;

  constructor(
    db: Db,
    private readonly heads: HeadRecords
  ) {
    this.entries = db.collection<LedgerEntryDocument>(LEDGER_COLLECTION);
  }

  /** The real tail: the newest entry, found from the head record forward (the head may lag a crashed writer). */
  async read(): Promise<Tail> {
    const head = await this.heads.newest();
    const from = head?.size ?? 0;
    const seq = await lastSeqFrom(this.entries, from);
    // The head is the tail (the usual case): its record has the frontier, no entry needs reading.
    if (head?.frontier && seq === from)
      return { size: from, frontier: head.frontier.map(fromHex), tally: head.tally ?? null };
    const projection = { _id: 1, frontier: 1, tally: 1 };
    const newest = seq > 0 ? await this.entries.findOne({ _id: seq }, { projection }) : null;
    // No entry at the head's size: entries were removed behind the ledger's back; take what is really there.
    const last =
      newest ?? (from > 0 ? await this.entries.find({}, { projection }).sort({ _id: -1 }).limit(1).next() : null);
    if (!last) return EMPTY_TAIL;
    // An entry of an earlier version carries its frontier; a newer one is rebuilt from the entries that completed it.
    const frontier = last.frontier ? last.frontier.map(fromHex) : await this.frontierAt(last._id);
    return { size: last._id, frontier, tally: last.tally ?? null };
  }

  /** The frontier of the tree of `size` leaves, from the `completed` hashes of the entries that recorded it. */
  private async frontierAt(size: number): Promise<Hash[]> {
    const ends = frontierEnds(size);
    const bySeq = new Map(
      (
        await findByIds(
          this.entries,
          ends.map((e) => e.seq)
        )
      ).map((d) => [d._id, d])
    );
    return ends.map(({ seq, level }) => {
      const hex = bySeq.get(seq)?.completed[level];
      if (!hex) throw new Error(`ledger entry ${seq} is missing or has no subtree at level ${level}`);
      return fromHex(hex);
    });
  }

  /**
   * The tail as the newest head record states it, when that record has its frontier and covers `atLeast` (null
   * otherwise). Not proof that nothing follows (a writer may have stopped before its head record): an insert on it
   * that is refused moves on to a newer record or to readTail.
   */
  async fromHeadRecord(atLeast: number): Promise<Tail | null> {
    const head = await this.heads.newest();
    return head?.frontier && head.size >= atLeast
      ? { size: head.size, frontier: head.frontier.map(fromHex), tally: head.tally ?? null }
      : null;
  }
}
