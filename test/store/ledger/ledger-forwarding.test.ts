/**
 * One writer per host (store/ledger/writer/cluster-primary.ts): a child process whose Ledger cannot reach any database
 * appends through its IPC channel, the parent's Ledger writes, and the child gets each entry back; the parent's own
 * appends interleave in one contiguous ledger. Its quota claims likewise go to the parent's QuotaStore, which leases
 * for both and so never has an insert of its slots refused. Real processes, real IPC, the embedded FerretDB.
 */
import { fork, ChildProcess } from 'node:child_process';
import path from 'node:path';
import { MongoClient } from 'mongodb';
import { Ledger } from '../../../store/ledger/ledger';
import { QuotaStore } from '../../../store/ledger/quota';
import { serveForwardedWrites } from '../../../store/ledger/writer/cluster-primary';
import { verifyLedger } from '../../../store/ledger/ledger-verify';
import { typescriptProcess } from '../../../scripts/stack/process';
import { useStoreDb } from '../../support/store-db';

const testDb = useStoreDb('ledger_forwarding');
let child: ChildProcess;
let ledger: Ledger;
let quota: QuotaStore;
let monitored: MongoClient;
/** Slot inserts of the parent's QuotaStore refused by the database (another writer took the slot). */
const refusedSlots: number[] = [];
const failures: unknown[] = [];

/** The child's next message carrying `field` (its appends travel on the same channel). */
const nextMessage = <T>(from: ChildProcess, field: string) =>
  new Promise<T>((resolve) => {
    const listener = (m: unknown) => {
      if (typeof m !== 'object' || m === null || !(field in m)) return;
      from.off('message', listener);
      resolve(m as T);
    };
    from.on('message', listener);
  });

beforeAll(async () => {
  monitored = new MongoClient(process.env.ZH_TEST_MONGODB_URI!, { monitorCommands: true });
  monitored.on('commandSucceeded', (e) => {
    const writeErrors = (e.reply as { writeErrors?: unknown[] }).writeErrors;
    if (e.commandName === 'insert' && writeErrors) refusedSlots.push(writeErrors.length);
  });
  await monitored.connect();
  ledger = new Ledger(testDb.db);
  quota = new QuotaStore(monitored.db(testDb.db.databaseName));
  const { args } = typescriptProcess(path.join(__dirname, '../../support/ledger-forward-child.ts'));
  child = fork(args[args.length - 1]!, [], { execArgv: args.slice(0, -1), stdio: 'inherit' });
  const ready = nextMessage<{ ready: true }>(child, 'ready');
  serveForwardedWrites({ ledger, quota }, child, (err) => failures.push(err));
  await ready;
}, 60_000);
afterAll(async () => {
  child?.kill();
  await quota?.close();
  await monitored?.close();
});

it("appends a child process's entries in the parent's ledger, beside the parent's own, and withdraws one not yet started", async () => {
  const report = nextMessage<{ seqs: (number | null)[]; errors: string[]; withdrawn: boolean }>(child, 'seqs');
  child.send({ run: 40 });
  const own = await Promise.all(
    Array.from({ length: 20 }, (_, i) => ledger.append({ kind: 'truth', key: `parent.${i}`, value: { i } }))
  );
  const { seqs, errors, withdrawn } = await report;
  expect(errors).toEqual([]);
  expect(withdrawn).toBe(true);
  const all = [...seqs, ...own.map((r) => r.entry.seq)].sort((a, b) => a! - b!);
  expect(all).toEqual(Array.from({ length: 60 }, (_, i) => i + 1));
  expect(failures).toEqual([]);
  // The forwarded entries are the child's, as written.
  const entry = await ledger.get(seqs[0]!);
  expect(entry).toMatchObject({ key: 'forwarded.0', did: 'did:example:child' });
  await ledger.headPublished();
  const report2 = await verifyLedger(ledger);
  expect(report2).toMatchObject({ consistent: true, first_bad_seq: null });
  expect((await ledger.head()).size).toBe(60);
}, 60_000);

it("takes a child process's quota slots from the parent's lease: the limit holds, a refund is reused, no slot insert is refused", async () => {
  const scope = 'truth:did:example:forwarded';
  const day = new Date().toISOString().slice(0, 10);
  const report = nextMessage<{ taken: (number | null)[]; errors: string[] }>(child, 'taken');
  child.send({ consume: 40, scope, limit: 50 });
  const own = await Promise.all(Array.from({ length: 20 }, () => quota.consume(scope, day, 50)));
  const { taken, errors } = await report;
  expect(errors).toEqual([]);
  const granted = [...taken, ...own.map((r) => (r.allowed ? r.count : null))].filter((n): n is number => n !== null);
  // 60 asked of a limit of 50, from two processes at once: 50 granted, each slot once.
  expect(granted).toHaveLength(50);
  expect(new Set(granted).size).toBe(50);
  expect(Math.max(...granted)).toBe(50);
  // A slot the child gives back goes into the parent's lease: the next caller gets exactly that one, then none is left.
  const back = taken.find((n): n is number => n !== null)!;
  const refunded = nextMessage<{ refunded: number | null; error?: string }>(child, 'refunded');
  child.send({ refund: back, scope });
  expect(await refunded).toEqual({ refunded: back });
  expect(await quota.consume(scope, day, 50)).toEqual({ allowed: true, count: back });
  expect((await quota.consume(scope, day, 50)).allowed).toBe(false);
  expect(refusedSlots).toEqual([]);
  expect(failures).toEqual([]);
  expect(await testDb.db.collection('quota_uses').countDocuments({ scope })).toBe(50);
}, 60_000);
