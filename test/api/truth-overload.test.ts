/**
 * Truth writes under overload, over real HTTP against the embedded stack: a process admits a bounded number of
 * writes and refuses the rest at once with 503 overloaded + Retry-After; a refused write spends no quota and writes
 * nothing; a write abandoned at its deadline is withdrawn if it had not started, gives its quota slot back, and
 * nothing keeps running after the answers. Throughput and latency are measured by `npm run bench:ledger`, not here.
 */
import net from 'node:net';
import { registerDid } from '../support/credentials';
import { eventually, http, startTestService, TestService } from '../support/service';

const DAY = () => new Date().toISOString().slice(0, 10);

describe('admission control', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService({ TRUTH_MAX_IN_FLIGHT: '4', TRUTH_DAILY_QUOTA: '100000' }, { worker: false });
  });
  afterAll(async () => svc.close());

  it('refuses writes past the limit at once, and a refused write spends no quota and writes nothing', async () => {
    const did = await registerDid(svc.urls.main, svc.adminToken, 'did:example:flood');
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        http('POST', `${svc.urls[i % 2 ? 'backup' : 'main']}/api/report/truth`, {
          headers: { 'x-did': did },
          body: { key: `flood.${i}`, value: { i } }
        })
      )
    );
    const written = results.filter((r) => r.status === 200);
    const refused = results.filter((r) => r.status === 503);
    expect(written.length + refused.length).toBe(200);
    expect(refused.length).toBeGreaterThan(0);
    expect(written.length).toBeGreaterThan(0);
    for (const r of refused) {
      expect(r.body).toMatchObject({ ok: false, error: 'overloaded' });
      expect(r.body.message).toMatch(/at its limit of 4/);
      expect(r.headers.get('retry-after')).toBe('1');
    }
    // Entries match the acknowledged writes exactly, and so do the quota slots once the slots this process leased
    // ahead and did not use are given back (within 2 s of the DID's last write; store/ledger/quota.ts).
    expect(await svc.db.collection('ledger').countDocuments({ did })).toBe(written.length);
    const slots = () => svc.db.collection('quota_uses').countDocuments({ scope: `truth:${did}`, day: DAY() });
    await eventually(
      async () => ((await slots()) === written.length ? true : undefined),
      10000,
      'one quota slot per acknowledged write'
    );
  });

  it('admits first, then checks credentials, then reads the body', async () => {
    const did = await registerDid(svc.urls.main, svc.adminToken, 'did:example:holder');
    // Four authenticated writes whose bodies never arrive hold the four places (a place is held until the answer).
    const url = new URL(`${svc.urls.main}/api/report/truth`);
    const holders = await Promise.all(Array.from({ length: 4 }, () => holdPlace(url, did)));
    try {
      // The holders' credential checks take a moment: wait until a write from another DID is refused.
      const probe = await registerDid(svc.urls.main, svc.adminToken, 'did:example:probe');
      await eventually(
        async () =>
          (await http('POST', url.href, { headers: { 'x-did': probe }, body: { key: 'order.probe', value: {} } }))
            .status === 503
            ? true
            : undefined,
        10000,
        'the holders to fill the gate'
      );
      // Refused before its credentials are even read.
      const forged = await http('POST', url.href, {
        headers: { 'x-did': 'did:example:nobody' },
        body: { key: 'order.forged', value: {} }
      });
      expect(forged.status).toBe(503);
      const crowded = await http('POST', url.href, {
        headers: { 'x-did': did },
        body: { key: 'order.crowded', value: {} }
      });
      expect(crowded.status).toBe(503);
      expect(crowded.body.error).toBe('overloaded');
      // The backup listener shares the process's gate.
      expect(
        (
          await http('POST', `${svc.urls.backup}/api/report/truth`, {
            headers: { 'x-did': did },
            body: { key: 'order.backup', value: {} }
          })
        ).status
      ).toBe(503);
      // Refused by the listener's server before Fastify (the route's exact path, a query string or not), and through
      // Fastify's first hook for another spelling of the path: one answer either way, the caller's X-Trace kept.
      const answers = await Promise.all(
        ['/api/report/truth', '/api/report/truth?from=probe', '/api/report/%74ruth'].map((path, i) =>
          http('POST', `${svc.urls.main}${path}`, {
            headers: { 'x-did': did, 'x-trace': `early-refusal-${i}` },
            body: { key: 'order.spelled', value: {} }
          })
        )
      );
      answers.forEach((res, i) => {
        expect(res.status).toBe(503);
        expect(res.body).toEqual({
          ok: false,
          error: 'overloaded',
          message: 'This process is at its limit of 4 concurrent truth writes; retry shortly',
          trace_id: `early-refusal-${i}`,
          limit: 4
        });
        expect(res.headers.get('x-trace')).toBe(`early-refusal-${i}`);
        expect(res.headers.get('retry-after')).toBe('1');
        expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
      });
    } finally {
      holders.forEach((socket) => socket.destroy());
    }
    // Places are given back when their connections close; a forged caller then gets its 401 (and holds no place).
    const after = await eventually(
      async () => {
        const res = await http('POST', url.href, {
          headers: { 'x-did': did },
          body: { key: 'order.after', value: {} }
        });
        return res.status === 200 ? res : undefined;
      },
      10000,
      'a write to be admitted again'
    );
    expect(after.body.seq).toBeGreaterThan(0);
    // The listener's server (made by api/app.ts in front of Fastify) keeps Fastify's HTTP defaults.
    expect(after.headers.get('keep-alive')).toBe('timeout=72');
    expect(
      (
        await http('POST', url.href, {
          headers: { 'x-did': 'did:example:nobody' },
          body: { key: 'order.forged', value: {} }
        })
      ).status
    ).toBe(401);
    expect(await svc.db.collection('ledger').countDocuments({ did })).toBe(1);
  });

  it('keeps answering reads while writes are refused', async () => {
    const did = await registerDid(svc.urls.main, svc.adminToken, 'did:example:reader');
    const writes = Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        http('POST', `${svc.urls.main}/api/report/truth`, {
          headers: { 'x-did': did },
          body: { key: `reader.${i}`, value: { i } }
        })
      )
    );
    const status = await http('GET', `${svc.urls.main}/api/status`);
    expect(status.status).toBe(200);
    await writes;
  });
});

describe('a write abandoned at its deadline', () => {
  let svc: TestService;
  beforeAll(async () => {
    // A deadline too short for most writes: most are answered 503 while their steps are still queued.
    svc = await startTestService(
      { TRUTH_WRITE_TIMEOUT_MS: '1', TRUTH_MAX_IN_FLIGHT: '1000', TRUTH_DAILY_QUOTA: '100000' },
      { worker: false }
    );
  });
  afterAll(async () => svc.close());

  it('gives its quota slot back when it had not started, and leaves nothing running', async () => {
    const did = await registerDid(svc.urls.main, svc.adminToken, 'did:example:hasty');
    const results = await Promise.all(
      Array.from({ length: 150 }, (_, i) =>
        http('POST', `${svc.urls.main}/api/report/truth`, {
          headers: { 'x-did': did },
          body: { key: `hasty.${i}`, value: { i } }
        })
      )
    );
    const unavailable = results.filter((r) => r.status === 503);
    expect(unavailable.length).toBeGreaterThan(0);
    for (const r of unavailable) expect(r.body.error).toBe('unavailable');
    const acknowledged = results.filter((r) => r.status === 200).length;

    // Writes whose insert had begun when the deadline passed may still land; nothing else does. Once settled, every
    // quota slot belongs to an entry in the ledger, and the counts stay put.
    const counts = async () => ({
      slots: await svc.db.collection('quota_uses').countDocuments({ scope: `truth:${did}`, day: DAY() }),
      entries: await svc.db.collection('ledger').countDocuments({ did })
    });
    const settled = await eventually(
      async () => {
        const first = await counts();
        await new Promise((r) => setTimeout(r, 500));
        const second = await counts();
        return first.slots === second.slots && first.entries === second.entries && first.slots === first.entries
          ? second
          : undefined;
      },
      20000,
      'quota slots and entries to agree'
    );
    expect(settled.entries).toBeGreaterThanOrEqual(acknowledged);
    expect(settled.entries).toBeLessThan(150);
    await new Promise((r) => setTimeout(r, 1000));
    expect(await counts()).toEqual(settled);
  });
});

/** Sends a write's headers (a body of 100 bytes announced) and no body: once its credentials are checked, it holds a place. */
async function holdPlace(url: URL, did: string): Promise<net.Socket> {
  const socket = net.connect(Number(url.port), url.hostname);
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  socket.write(
    `POST ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nX-DID: ${did}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n`
  );
  return socket;
}
