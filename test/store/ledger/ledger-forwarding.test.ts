/**
 * One writer per host (store/ledger/ledger-forwarding.ts): a child process whose Ledger cannot reach any database
 * appends through its IPC channel, the parent's Ledger writes, and the child gets each entry back; the parent's own
 * appends interleave in one contiguous ledger. Real processes, real IPC, the embedded FerretDB.
 */
import { fork, ChildProcess } from 'node:child_process';
import path from 'node:path';
import { MongoClient } from 'mongodb';
import { Ledger } from '../../../store/ledger/ledger';
import { serveForwardedAppends } from '../../../store/ledger/ledger-forwarding';
import { verifyLedger } from '../../../store/ledger/ledger-verify';
import { typescriptProcess } from '../../../scripts/stack/process';
import { useStoreDb } from '../../support/store-db';

let child: ChildProcess | undefined;
const testDb = useStoreDb('ledger_forwarding');
afterAll(async () => {
  child?.kill();
});

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

it("appends a child process's entries in the parent's ledger, beside the parent's own, and withdraws one not yet started", async () => {
  const ledger = new Ledger(testDb.db);
  const { args } = typescriptProcess(path.join(__dirname, '../../support/ledger-forward-child.ts'));
  child = fork(args[args.length - 1]!, [], { execArgv: args.slice(0, -1), stdio: 'inherit' });
  const failures: unknown[] = [];
  serveForwardedAppends(ledger, child, (err) => failures.push(err));
  await nextMessage<{ ready: true }>(child, 'ready');

  const report = nextMessage<{ seqs: (number | null)[]; errors: string[]; withdrawn: boolean }>(child, 'seqs');
  child.send({ run: 40 });
  const own = await Promise.all(Array.from({ length: 20 }, (_, i) => ledger.append({ kind: 'truth', key: `parent.${i}`, value: { i } })));
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
