/**
 * A process that appends and takes quota only through its IPC channel (test/store/ledger/ledger-forwarding.test.ts):
 * its Ledger's and QuotaStore's database is a port nothing listens on, so an append or a slot that did not go to the
 * parent would fail. On `{ run: n }` it appends n entries at once, plus one withdrawn before it was sent, and
 * reports what it got; on `{ consume: n, scope, limit }` it takes n slots at once, on `{ refund: n, scope }` gives
 * slot n back.
 */
import { MongoClient } from 'mongodb';
import { AppendWithdrawn } from '../../store/ledger/append';
import { Ledger } from '../../store/ledger/ledger';
import { forwardQuotaTo } from '../../store/ledger/writer/cluster-primary';
import { viaClusterPrimary } from '../../store/ledger/writer/transports';
import { QuotaStore } from '../../store/ledger/quota';

const client = new MongoClient('mongodb://127.0.0.1:9/', { serverSelectionTimeoutMS: 500 });
const ledger = new Ledger(client.db('nowhere'), { writer: viaClusterPrimary(process) });
const quota = forwardQuotaTo(process, new QuotaStore(client.db('nowhere')));

process.on('message', (message: unknown) => {
  const take = message as { consume?: number; refund?: number; scope?: string; limit?: number };
  const day = new Date().toISOString().slice(0, 10);
  if (typeof take.consume === 'number') {
    void Promise.allSettled(
      Array.from({ length: take.consume }, () => quota.consume(take.scope!, day, take.limit!))
    ).then((results) =>
      process.send!({
        taken: results.map((r) => (r.status === 'fulfilled' && r.value.allowed ? r.value.count : null)),
        errors: results.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason))
      })
    );
    return;
  }
  if (typeof take.refund === 'number') {
    void quota.refund(take.scope!, day, take.refund).then(
      () => process.send!({ refunded: take.refund }),
      (err: unknown) => process.send!({ refunded: null, error: String(err) })
    );
    return;
  }
  const run = (message as { run?: number }).run;
  if (typeof run !== 'number') return;
  void (async () => {
    const results = await Promise.allSettled(
      Array.from({ length: run }, (_, i) =>
        ledger.append({ kind: 'truth', key: `forwarded.${i}`, value: { i }, did: 'did:example:child' })
      )
    );
    const aborted = new AbortController();
    aborted.abort();
    const withdrawn = await ledger
      .append({ kind: 'truth', key: 'forwarded.withdrawn', value: {} }, { signal: aborted.signal })
      .then(
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
