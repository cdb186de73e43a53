/**
 * The MongoDB connection and the indexes every collection needs. Works on real MongoDB and on FerretDB alike:
 * no transactions, no change streams, no TTL indexes, no nested arrays, no user-supplied keys as field names.
 */
import { type AnyBulkWriteOperation, Collection, type Document, Db, Filter, MongoClient, WithId } from 'mongodb';
import { nodeChangesCollection, NODE_CHANGES_SLOTS, NODE_CHANGES_SLOT_MS } from './federation/node-changes-ring';

export interface Mongo {
  client: MongoClient;
  db: Db;
  close(): Promise<void>;
}

export interface MongoOptions {
  uri: string;
  dbName: string;
  /** How long an operation waits for a usable server before failing; bounds every request when MongoDB is down. */
  serverSelectionTimeoutMS?: number;
  appName?: string;
}

export async function connectMongo(options: MongoOptions): Promise<Mongo> {
  assertDriverPatched();
  const client = new MongoClient(options.uri, {
    appName: options.appName ?? 'zhongshu-hub',
    serverSelectionTimeoutMS: options.serverSelectionTimeoutMS ?? 5000,
    connectTimeoutMS: 5000,
    // An operation sent just as the server goes away can otherwise wait forever on a socket nobody answers,
    // and one stuck ledger commit would hold every append queued behind it.
    socketTimeoutMS: 20000,
    // Poll the server's state rather than stream it: FerretDB does not keep the streaming hello that the driver's
    // monitor waits on, and after a restart the monitor could stay stuck, failing every operation.
    serverMonitoringMode: 'poll',
    heartbeatFrequencyMS: 2000,
    maxPoolSize: 50,
    // FerretDB does not implement retryable writes; a retried append could double-write, so the ledger
    // does its own idempotent retries (see ledger.ts).
    retryWrites: false
  });
  await client.connect();
  const db = client.db(options.dbName);
  return {
    client,
    db,
    close: () => client.close()
  };
}

/**
 * Whether a write failed on a unique index. FerretDB reports such a clash in findAndModify without code 11000, in
 * the message only.
 */
export const isDuplicateKey = (err: unknown): boolean =>
  (err as { code?: unknown }).code === 11000 || /E11000|duplicate key/i.test((err as Error).message ?? '');

/**
 * Runs an upsert again when it lost the race to create its document. MongoDB retries such an upsert itself; FerretDB
 * does not (its upsert finds nothing, then inserts: two first writes of one document both try to insert, and the
 * loser gets E11000, or NamespaceExists (48) when both also create the collection). The retry finds the document and
 * updates it.
 */
export async function retryingUpsert<T>(write: () => Promise<T>, attempts = 3): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await write();
    } catch (err) {
      if (attempt >= attempts || !(isDuplicateKey(err) || (err as { code?: unknown }).code === 48)) throw err;
    }
  }
}

/**
 * The driver must carry patches/mongodb+<version>.patch (applied by `npm install`/`npm ci` through patch-package;
 * docs/storage.md#dependency-patches). Unpatched, a command written to a connection the server just closed waits
 * forever, and when that command is the server monitor's check the process never sees the database again. Refusing
 * to start is better than a process that silently stops recovering.
 */
function assertDriverPatched(): void {
  const { Connection } = require('mongodb/lib/cmap/connection') as {
    Connection: { prototype: Record<string, unknown> };
  };
  if (typeof Connection.prototype.throwIfClosed !== 'function') {
    throw new Error(
      'The mongodb driver is not patched (patches/mongodb+*.patch); run `npx patch-package` after installing without scripts'
    );
  }
}

/** Index specs by collection. Created at start; creating an existing index is a no-op. */
export const INDEXES: Record<string, { key: Record<string, 1 | -1>; name: string; unique?: boolean }[]> = {
  deploy_ports: [{ key: { app: 1 }, name: 'app_unique', unique: true }],
  ledger: [
    { key: { idem: 1 }, name: 'idem_unique', unique: true },
    { key: { key: 1, _id: 1 }, name: 'key_seq' },
    { key: { kind: 1, _id: 1 }, name: 'kind_seq' }
  ],
  homologous_tokens: [{ key: { token_id: 1 }, name: 'token_id_unique', unique: true }],
  api_keys: [{ key: { secret_hash: 1 }, name: 'secret_hash' }],
  oauth_clients: [],
  oauth_revocations: [],
  // DPoP replay store and nonces (_id is the unique key); expired records are pruned by the store (no TTL indexes).
  dpop_jtis: [{ key: { expires_at: 1 }, name: 'expires_at' }],
  dpop_nonces: [{ key: { expires_at: 1 }, name: 'expires_at' }],
  dids: [],
  // One record per revoked DID, written before the revocation and kept ten minutes (store/active-dids.ts).
  did_revocations: [],
  ledger_head: [],
  // The position lists (store/ledger/positions.ts), read and written by `_id`.
  ledger_positions: [],
  ledger_marks: [],
  ledger_idempotency: [],
  ledger_writer: [],
  quota_uses: [
    { key: { day: 1 }, name: 'day' },
    { key: { scope: 1, day: 1 }, name: 'scope_day' }
  ],
  daemon_assets: [],
  nodes: [
    { key: { seq: 1 }, name: 'seq_unique', unique: true },
    { key: { state: 1, seq: 1 }, name: 'state_seq' },
    { key: { 'brand.code': 1, seq: 1 }, name: 'brand_seq' }
  ],
  counters: [],
  node_presence: [],
  // One small document per running API process: its presence clock (store/federation/presence.ts).
  node_presence_clocks: [],
  node_heartbeat_history: [],
  tasks: [
    { key: { state: 1, priority: -1, created_at: 1 }, name: 'claim_order' },
    // A2A ListTasks with a state or context filter (store/federation/tasks.ts listBySubmitter).
    { key: { submitted_by: 1, state: 1 }, name: 'submitter_state' },
    { key: { submitted_by: 1, context_id: 1 }, name: 'submitter_context' }
  ],
  // Each submitter's tasks in order, and the queue's counters (task-lists.ts, task-counters.ts): read by `_id`.
  task_lists: [],
  task_counters: [],
  // One record per claim attempt (_id <task id>#<attempt>): the unique _id makes a claim exclusive.
  task_claims: [],
  peers: [],
  directory_tree_versions: [{ key: { proposal_id: 1 }, name: 'proposal_id' }],
  tree_proposals: [{ key: { state: 1, created_at: 1 }, name: 'state_created' }],
  chat_usage: [{ key: { key_id: 1, day: 1 }, name: 'key_day' }],
  chat_usage_tallies: [{ key: { key_id: 1, day: 1 }, name: 'key_day' }],
  chat_limit_slots: [{ key: { expires_at: 1 }, name: 'expires_at' }],
  chat_limit_marks: [{ key: { expires_at: 1 }, name: 'expires_at' }],
  chat_key_groups: [{ key: { owner_key_id: 1 }, name: 'owner_key_id' }],
  // The node change log's ring (store/federation/node-change-log.ts, NODE_CHANGES_SLOT_MS): each collection holds at most a
  // few seconds of records, read whole (no index).
  ...Object.fromEntries(
    Array.from({ length: NODE_CHANGES_SLOTS }, (_, s) => [nodeChangesCollection(s * NODE_CHANGES_SLOT_MS), []])
  )
};

export async function ensureIndexes(db: Db): Promise<void> {
  for (const [collection, specs] of Object.entries(INDEXES)) {
    const existing = await db.listCollections({ name: collection }, { nameOnly: true }).toArray();
    if (existing.length === 0) await db.createCollection(collection).catch(ignoreAlreadyExists);
    for (const spec of specs) {
      await db.collection(collection).createIndex(spec.key, { name: spec.name, unique: spec.unique ?? false });
    }
  }
}

function ignoreAlreadyExists(err: unknown): void {
  if ((err as { codeName?: string }).codeName !== 'NamespaceExists') throw err;
}

/**
 * The documents with these `_id`s (those that exist, in no particular order): one `_id` lookup per id, all at once
 * (a `find({ _id: { $in } })` reads the whole collection in FerretDB, which pushes no `$in` down).
 */
export async function findByIds<T extends { _id: string | number }>(
  collection: Collection<T>,
  ids: T['_id'][]
): Promise<WithId<T>[]> {
  if (ids.length === 0) return [];
  const found = await Promise.all(ids.map((_id) => collection.findOne({ _id } as Filter<T>)));
  return found.filter((d) => d !== null);
}

/**
 * Statements per command, and such commands per process at once, of writeInCommands. FerretDB 1.24 runs one query
 * per statement of an update (or delete) command and closes them only when the whole command ends, so a command
 * holds up to one PostgreSQL connection per statement, from a pool of 50: one command of more statements than that
 * waits for itself forever, and several smaller ones at once wait for each other, and every client with them (the
 * million-entry bench fill hung FerretDB this way: the fill's position-list writes, some 20 statements each, beside
 * the key tree indexer's 4 commands of 8). 4 × 3 = 12 connections per process at most, so four writing processes
 * (API replicas, the worker, a bench's filler) stay under 50 and one of their commands can always go on.
 */
export const STATEMENTS_PER_COMMAND = 4;
export const COMMANDS_AT_ONCE = 3;
let commandsRunning = 0;
const commandsWaiting: (() => void)[] = [];

async function inCommandSlot<T>(run: () => Promise<T>): Promise<T> {
  if (commandsRunning >= COMMANDS_AT_ONCE) await new Promise<void>((resolve) => commandsWaiting.push(resolve));
  else commandsRunning++;
  try {
    return await run();
  } finally {
    const next = commandsWaiting.shift();
    if (next) next();
    else commandsRunning--;
  }
}

/**
 * An unordered bulk write of any size, as commands of at most STATEMENTS_PER_COMMAND statements, at most
 * COMMANDS_AT_ONCE of them at once in this process (see STATEMENTS_PER_COMMAND). `retryUpserts`: each command
 * through retryingUpsert. Every write goes (a failed command does not stop the others); throws the first failure.
 */
export async function writeInCommands<T extends Document>(
  collection: Collection<T>,
  ops: AnyBulkWriteOperation<T>[],
  opts: { retryUpserts?: boolean } = {}
): Promise<void> {
  const commands: AnyBulkWriteOperation<T>[][] = [];
  for (let at = 0; at < ops.length; at += STATEMENTS_PER_COMMAND)
    commands.push(ops.slice(at, at + STATEMENTS_PER_COMMAND));
  const results = await Promise.allSettled(
    commands.map((command) =>
      inCommandSlot(() => {
        const write = () => collection.bulkWrite(command, { ordered: false });
        return opts.retryUpserts ? retryingUpsert(write) : write();
      })
    )
  );
  const failed = results.find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
}

/**
 * Deletes the documents with these `_id`s: one delete statement per id in unordered bulk writes (writeInCommands;
 * a `deleteMany({ _id: { $in } })` read and decoded the whole collection in FerretDB: 3.3 s for 8 ids among 213,000
 * quota slots on PostgreSQL, against 7 ms this way). Throws what a write throws (some ids may have been deleted).
 */
export async function deleteByIds<T extends { _id: string }>(collection: Collection<T>, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  await writeInCommands(
    collection,
    ids.map((_id) => ({ deleteOne: { filter: { _id } as Filter<T> } }))
  );
}
