/**
 * Where the node change log lives (store/federation/node-change-log.ts writes and reads it; store/mongo.ts creates it): no
 * imports, so both can use it.
 */

/** How long change records are kept; a reader that has not read for longer starts over from the documents. */
export const NODE_CHANGES_KEEP_MS = 120_000;
/**
 * The change log is a ring of NODE_CHANGES_SLOTS collections, `node_changes_00` … `node_changes_15`, each holding the
 * records written in one NODE_CHANGES_SLOT_MS interval (interval n in collection n mod NODE_CHANGES_SLOTS), so a
 * reader asking for the last few seconds reads one or two small collections, never the whole NODE_CHANGES_KEEP_MS.
 * FerretDB filters a `written_at` range itself, after fetching every document of the collection from its backend
 * (measured on v1.24/PostgreSQL: a find by date range over 10,000 records took 244 ms, a find by _id 4.7 ms), and
 * every API process and presence sweeper reads the log every second: with one collection, the 10,000 records of a
 * mass online were read whole by each reader each second until they aged out. Writers empty the collections that
 * come next in the ring (older than NODE_CHANGES_KEEP_MS, see pruneChanges), a few small deletes every
 * NODE_CHANGES_SLOT_MS instead of one over the whole log. 16 slots of 10 s hold the 120 s kept, the slot being
 * written, and the three being emptied.
 */
export const NODE_CHANGES_SLOT_MS = 10_000;
export const NODE_CHANGES_SLOTS = 16;

/** The ring collection of the interval holding `ms`. */
export function nodeChangesCollection(ms: number): string {
  return `node_changes_${String(Math.floor(ms / NODE_CHANGES_SLOT_MS) % NODE_CHANGES_SLOTS).padStart(2, '0')}`;
}
