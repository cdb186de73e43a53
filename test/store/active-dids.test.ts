/**
 * The truth write's memory of active DIDs (store/active-dids.ts) against the embedded FerretDB: a remembered DID is
 * checked by reads of the revocation feed, not by reads of its own; a revocation made elsewhere counts once the feed
 * is read; a DID in the feed is never remembered. Two CredentialStores on one database stand for two API processes.
 * The DIDs' own reads are counted, so what is read is observed, not timed.
 */
import { ActiveDids, recordDidRevocation } from '../../store/active-dids';
import { CredentialStore } from '../../store/credentials';
import { eventually } from '../support/service';
import { useStoreDb } from '../support/store-db';

const testDb = useStoreDb('active_dids');
const TTL = 1000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** An ActiveDids whose DID reads go to `credentials` and are counted per DID. */
function counted(credentials: CredentialStore): { memory: ActiveDids; reads: Map<string, number> } {
  const reads = new Map<string, number>();
  const memory = new ActiveDids(testDb.db, async (did) => {
    reads.set(did, (reads.get(did) ?? 0) + 1);
    return (await credentials.activeDid(did)) !== null;
  });
  return { memory, reads };
}

describe('ActiveDids', () => {
  it("keeps a steady writer's DIDs checked by reads of the feed, without reading them again", async () => {
    const here = new CredentialStore(testDb.db);
    const dids = ['did:example:steady-a', 'did:example:steady-b', 'did:example:steady-c'];
    for (const did of dids) await here.registerDid(did, null);
    const { memory, reads } = counted(here);
    // Three times TRUTH_DID_CACHE_MS of checks, one every 20 ms.
    for (let t = 0; t < (3 * TTL) / 20; t++) {
      for (const did of dids) expect(await memory.isActive(did, TTL)).toBe(true);
      await sleep(20);
    }
    expect(Object.fromEntries(reads)).toEqual(Object.fromEntries(dids.map((did) => [did, 1])));
    // Idle for longer than the cache time: the next checks wait for one read of the feed, still no DID read.
    await sleep(2 * TTL);
    for (const did of dids) expect(await memory.isActive(did, TTL)).toBe(true);
    expect(Object.fromEntries(reads)).toEqual(Object.fromEntries(dids.map((did) => [did, 1])));
  });

  it('refuses a DID revoked through another process once the feed is read, and at once when revoked here', async () => {
    const here = new CredentialStore(testDb.db);
    const elsewhere = new CredentialStore(testDb.db);
    await here.registerDid('did:example:revoked-elsewhere', null);
    await here.registerDid('did:example:revoked-here', null);
    const { memory } = counted(here);
    expect(await memory.isActive('did:example:revoked-elsewhere', TTL)).toBe(true);
    await elsewhere.revokeDid('did:example:revoked-elsewhere');
    expect(
      await testDb.db.collection('did_revocations').findOne({ _id: 'did:example:revoked-elsewhere' as never })
    ).toMatchObject({ at: expect.any(Date) });
    await eventually(
      async () => ((await memory.isActive('did:example:revoked-elsewhere', TTL)) ? undefined : true),
      5000,
      'the revocation to count'
    );

    expect(await here.activeDids.isActive('did:example:revoked-here', TTL)).toBe(true);
    await here.revokeDid('did:example:revoked-here');
    expect(await here.activeDids.isActive('did:example:revoked-here', TTL)).toBe(false);
  });

  it('reads a DID found in the feed every time, even while it is still active (its revoker stopped before revoking)', async () => {
    const here = new CredentialStore(testDb.db);
    await here.registerDid('did:example:half-revoked', null);
    await here.registerDid('did:example:bystander', null);
    const { memory, reads } = counted(here);
    expect(await memory.isActive('did:example:half-revoked', TTL)).toBe(true);
    expect(await memory.isActive('did:example:bystander', TTL)).toBe(true);
    await recordDidRevocation(testDb.db, 'did:example:half-revoked');
    await recordDidRevocation(testDb.db, 'did:example:half-revoked'); // a second record of one DID is no error
    // Once the feed is read (a check half the cache time after the last), the DID is no longer taken from memory.
    await eventually(
      async () => {
        const before = reads.get('did:example:half-revoked')!;
        expect(await memory.isActive('did:example:half-revoked', TTL)).toBe(true);
        await memory.isActive('did:example:bystander', TTL);
        return reads.get('did:example:half-revoked')! > before ? true : undefined;
      },
      5000,
      'the DID to be read again'
    );
    const before = reads.get('did:example:half-revoked')!;
    for (let i = 0; i < 3; i++) expect(await memory.isActive('did:example:half-revoked', TTL)).toBe(true);
    expect(reads.get('did:example:half-revoked')).toBe(before + 3);
    expect(reads.get('did:example:bystander')).toBe(1);
  });

  it('reads every time with a cache time of 0', async () => {
    const here = new CredentialStore(testDb.db);
    await here.registerDid('did:example:uncached', null);
    const { memory, reads } = counted(here);
    for (let i = 0; i < 3; i++) expect(await memory.isActive('did:example:uncached', 0)).toBe(true);
    expect(reads.get('did:example:uncached')).toBe(3);
    expect(await memory.isActive('did:example:unknown', TTL)).toBe(false);
    expect(await memory.isActive('did:example:unknown', TTL)).toBe(false);
    expect(reads.get('did:example:unknown')).toBe(2);
  });
});
