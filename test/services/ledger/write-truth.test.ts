/**
 * The truth write service against the embedded FerretDB (a real ledger and quota store): a retry with the same
 * Idempotency-Key is answered with the first entry and gives its quota slot back, a retry refused for quota is
 * answered all the same, and a write past its deadline is answered 503, withdrawn and its slot given back, so its
 * retry lands it exactly once. (The routes' HTTP behaviour is in test/api/truth-ledger.test.ts and
 * test/api/truth-overload.test.ts.)
 */
import type { Client } from '@temporalio/client';
import { AppError } from '../../../core/errors';
import { createTruthWrites, type TruthWriteOptions, type WriteLog } from '../../../services/ledger/write-truth';
import { Ledger } from '../../../store/ledger/ledger';
import { QuotaStore } from '../../../store/ledger/quota';
import { eventually } from '../../support/service';
import { useStoreDb } from '../../support/store-db';

const testDb = useStoreDb('write_truth');

const options = (dailyQuota: number, writeTimeoutMs: number): TruthWriteOptions => ({
  dailyQuota,
  maxValueBytes: 64 * 1024,
  writeTimeoutMs,
  risk: { highRiskTypes: [], highRiskKeyPrefixes: [] },
  approval: { timeoutSeconds: 60, taskQueue: 'unused', hubDid: 'did:example:hub' }
});
// No write here is high-risk, so none starts a workflow: the Temporal client is never called.
const noTemporal = undefined as unknown as Client;

const warnings: string[] = [];
const log: WriteLog = { warn: (_details, message) => warnings.push(message) };

const quotas: QuotaStore[] = [];
afterAll(async () => {
  await Promise.all(quotas.map((q) => q.close()));
});
function stores() {
  const quota = new QuotaStore(testDb.db);
  quotas.push(quota);
  return { ledger: new Ledger(testDb.db), quota, temporal: noTemporal };
}

const write = (did: string, key: string, idempotencyKey: string | null) => ({
  did,
  key,
  value: { key },
  truthType: null,
  idempotencyKey
});
const refusal = (err: unknown) => (err instanceof AppError ? { code: err.code, status: err.status } : err);

it('answers a retry with the first entry and gives its slot back; a retry past the quota is answered too', async () => {
  const did = 'did:example:retrier';
  const writes = createTruthWrites(stores(), options(2, 10_000));

  const first = await writes.writeTruth(write(did, 'retry.a', 'key-a'), log);
  expect(first).toMatchObject({ kind: 'written', duplicate: false });
  const retry = await writes.writeTruth(write(did, 'retry.a', 'key-a'), log);
  expect(retry).toEqual({ ...first, duplicate: true });

  // The retry's slot was given back: the second new write of a quota of two still fits, the third does not.
  expect(await writes.writeTruth(write(did, 'retry.b', 'key-b'), log)).toMatchObject({ duplicate: false });
  await expect(writes.writeTruth(write(did, 'retry.c', 'key-c'), log).catch(refusal)).resolves.toEqual({
    code: 'quota_exceeded',
    status: 429
  });
  // With the quota used up, a retry still gets what the first write got, not 429.
  expect(await writes.writeTruth(write(did, 'retry.a', 'key-a'), log)).toEqual({ ...first, duplicate: true });
  expect(warnings).toEqual([]);
});

it('withdraws a write past its deadline and gives its slot back, so its retry lands it exactly once', async () => {
  const did = 'did:example:late';
  const shared = stores();
  // 1 ms: the deadline passes while the write's quota slot is being claimed, before its append starts.
  const hurried = createTruthWrites(shared, options(1, 1));
  const patient = createTruthWrites(shared, options(1, 10_000));

  await expect(hurried.writeTruth(write(did, 'late.a', 'key-late'), log).catch(refusal)).resolves.toEqual({
    code: 'unavailable',
    status: 503
  });
  // Once the withdrawn write has given its slot back (the only one of the day), the retry takes it and appends:
  // not a duplicate, since the withdrawn write left nothing.
  const retried = await eventually(() =>
    patient.writeTruth(write(did, 'late.a', 'key-late'), log).catch((err: unknown) => {
      if (err instanceof AppError && err.code === 'quota_exceeded') return undefined;
      throw err;
    })
  );
  expect(retried).toMatchObject({ kind: 'written', duplicate: false });
  await expect(patient.writeTruth(write(did, 'late.b', 'key-late-b'), log).catch(refusal)).resolves.toEqual({
    code: 'quota_exceeded',
    status: 429
  });
  expect(warnings).toEqual([]);
});
