/**
 * The ledger entry: its stored document and its canonical encoding (the bytes its Merkle leaf hash covers).
 *
 * Canonical leaf bytes = UTF-8 of the RFC 8785 canonical JSON of
 *   {"created_at":…,"did":…,"event_id":…,"key":…,"kind":…,"seq":…,"truth_type":…,"value":…}
 * with null for an absent did or truth_type, `created_at` as ISO 8601 UTC with milliseconds, and `value` the
 * record's JSON object in canonical form. Anyone holding an entry can recompute its leaf hash and, from all
 * entries, the root (docs/ledger.md#recomputing-the-merkle-root).
 */
import { z } from 'zod';
import { canonicalJson } from './canonical-json';
import { RawJson, rawJsonSchema } from '../raw-json';

export type LedgerEntryKind = 'truth' | 'event';

/** Entries by category up to and including an entry (the running tally: core/ledger/tally.ts). */
export type LedgerTally = Record<string, number>;

export interface LedgerLeafFields {
  seq: number;
  event_id: string;
  kind: LedgerEntryKind;
  key: string;
  truth_type: string | null;
  did: string | null;
  created_at: string;
}

export interface LedgerEntryDocument extends LedgerLeafFields {
  _id: number;
  /** The value as canonical JSON text: user JSON may hold keys or shapes a MongoDB field cannot. */
  value_json: string;
  /** Idempotency scope: `k:<did>:<Idempotency-Key>` or `e:<event_id>`; unique. */
  idem: string;
  leaf_hash: string;
  /** Perfect subtrees completed by this leaf, level 0 (the leaf) upward. */
  completed: string[];
  /**
   * Roots of the perfect subtrees making up the tree of `seq` leaves, largest first. Stored with the entry by
   * earlier versions only: each is also the `completed` hash of the entry that completed it (frontierEnds), and
   * storing them (one hash per bit set in `seq`, 10 on average near a million entries) cost FerretDB/PostgreSQL a
   * fifth of its CPU per insert at concurrency 16. Present on an entry an append has just built (the tail it
   * leaves) and in the head records.
   */
  frontier?: string[];
  /** Merkle root of the tree of `seq` leaves. */
  root: string;
  /** Entries by category up to this one (core/ledger/tally.ts); absent in ledgers begun before tallies existed. */
  tally?: LedgerTally;
}

/** The canonical bytes of an entry; `valueJson` must already be canonical JSON. */
export function ledgerLeafBytes(fields: LedgerLeafFields, valueJson: string): Buffer {
  const head = canonicalJson({
    created_at: fields.created_at,
    did: fields.did,
    event_id: fields.event_id,
    key: fields.key,
    kind: fields.kind,
    seq: fields.seq,
    truth_type: fields.truth_type
  });
  // "value" sorts after every other member, so it goes last: splice it in before the closing brace.
  return Buffer.from(`${head.slice(0, -1)},"value":${valueJson}}`, 'utf8');
}

/** The public form of an entry, as the read endpoints return it. */
export function publicEntry(doc: LedgerEntryDocument) {
  return {
    seq: doc.seq,
    key: doc.key,
    // The stored canonical text, served as it is (api/plugins/json-body.ts splices it into the reply).
    value: new RawJson(doc.value_json),
    truth_type: doc.truth_type,
    did: doc.did,
    kind: doc.kind,
    event_id: doc.event_id,
    created_at: doc.created_at,
    leaf_hash: doc.leaf_hash
  };
}

/** The public form of an entry as a response schema (every read endpoint returns it). */
export const publicEntrySchema = z.object({
  seq: z.number().int(),
  key: z.string(),
  value: rawJsonSchema('the value, as canonical JSON (the bytes the leaf hash covers)'),
  truth_type: z.string().nullable(),
  did: z.string().nullable(),
  kind: z.enum(['truth', 'event']),
  event_id: z.string(),
  created_at: z.string(),
  leaf_hash: z.string()
});
