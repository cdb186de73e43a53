/**
 * A process that appends only through its IPC channel (test/store/ledger/ledger-forwarding.test.ts): its Ledger's
 * database is a port nothing listens on, so an append that did not go to the parent would fail. On
 * `{ run: n }` it appends n entries at once, plus one withdrawn before it was sent, and reports what it got.
 */
import { MongoClient } from 'mongodb';
import { AppendWithdrawn, Ledger } from '../../store/ledger/ledger';
import { forwardAppendsTo } from '../../store/ledger/ledger-forwarding';

const client = new MongoClient('mongodb://127.0.0.1:9/', { serverSelectionTimeoutMS: 500 });
const ledger = new Ledger(client.db('nowhere'), { forward: forwardAppendsTo(process) });

process.on('message', (message: unknown) => {
  const run = (message as { run?: number }).run;
  if (typeof run !== 'number') return;
  void (async () => {
    const results = await Promise.allSettled(Array.from({ length: run }, (_, i) => ledger.append({ kind: 'truth', key: `forwarded.${i}`, value: { i }, did: 'did:example:child' })));
    const aborted = new AbortController();
    aborted.abort();
    const withdrawn = await ledger.append({ kind: 'truth', key: 'forwarded.withdrawn', value: {} }, { signal: aborted.signal }).then(
      () => false,
      (err: unknown) => err instanceof AppendWithdrawn
    );
    process.send!({
      seqs: results.map((r) => (r.status === 'fulfilled' ? r.value.entry.seq : null)),
      errors: results.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason)),
      withdrawn
    });
  })();
});
process.send!({ ready: true });
