/**
 * The admission gate's refusals reach the log as one warning per interval with their count, not one line each:
 * a flood of refusals (thousands a second under overload) must not add a logged stack trace apiece to the load it
 * sheds. (What the refused callers see, 503 overloaded at once, is in test/api/truth-overload.test.ts.)
 */
import { Writable } from 'node:stream';
import pino from 'pino';
import { AdmissionGate } from '../../api/plugins/admission';

it('logs the refusals of each 10 s as one warning with their count', () => {
  jest.useFakeTimers();
  try {
    const lines: Record<string, unknown>[] = [];
    const log = pino(
      { level: 'info' },
      new Writable({
        write: (chunk: Buffer, _enc, done) => (
          lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>),
          done()
        )
      })
    );
    const gate = new AdmissionGate('truth_write', 2);
    const places = [gate.tryEnter(), gate.tryEnter()];
    expect(places.every((p) => p !== null)).toBe(true);
    const refuse = (n: number) => {
      for (let i = 0; i < n; i++) {
        expect(gate.tryEnter()).toBeNull();
        gate.logRefusals(log);
      }
    };
    refuse(500);
    expect(lines).toEqual([]);
    jest.advanceTimersByTime(10_000);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 40, gate: 'truth_write', limit: 2, refused: 500, refused_total: 500 });
    // The next refusals open the next interval; a place given back admits again.
    refuse(3);
    places[0]!();
    expect(gate.tryEnter()).not.toBeNull();
    jest.advanceTimersByTime(10_000);
    expect(lines.map((l) => l.refused)).toEqual([500, 3]);
    expect(lines[1]).toMatchObject({ refused_total: 503 });
    jest.advanceTimersByTime(60_000);
    expect(lines).toHaveLength(2);
  } finally {
    jest.useRealTimers();
  }
});

it('answers a full gate before the app sees the request, on the exact path of a gated route only', async () => {
  const { createServer } = await import('node:http');
  const { EarlyRefusals } = await import('../../api/plugins/admission');
  const gate = new AdmissionGate('truth_write', 1);
  const early = new EarlyRefusals(
    { truth_write: gate },
    { 'X-DID': 'did:example:hub' },
    () => 'trace-fresh-000',
    pino({ level: 'silent' })
  );
  early.add('POST', '/upsert', 'truth_write');
  early.add('GET', '/entries/:id', 'truth_write');
  const seen: string[] = [];
  const server = createServer((req, res) => {
    if (early.refuse(req, res)) return;
    seen.push(`${req.method} ${req.url}`);
    res.end('app');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  try {
    const post = (path: string) => fetch(`${base}${path}`, { method: 'POST', body: '{}' });
    expect((await post('/upsert')).status).toBe(200);
    const leave = gate.tryEnter();
    const refused = await post('/upsert?x=1');
    expect(refused.status).toBe(503);
    expect(await refused.json()).toEqual({
      ok: false,
      error: 'overloaded',
      message: 'This process is at its limit of 1 concurrent truth writes; retry shortly',
      trace_id: 'trace-fresh-000',
      limit: 1
    });
    expect(
      Object.fromEntries(['x-trace', 'x-did', 'retry-after', 'content-type'].map((h) => [h, refused.headers.get(h)]))
    ).toEqual({
      'x-trace': 'trace-fresh-000',
      'x-did': 'did:example:hub',
      'retry-after': '1',
      'content-type': 'application/json; charset=utf-8'
    });
    // Other routes, and gated paths with parameters (left to the app's own hook), reach the app.
    expect((await post('/other')).status).toBe(200);
    expect((await fetch(`${base}/entries/7`)).status).toBe(200);
    expect(gate.refused).toBe(1);
    leave!();
    expect((await post('/upsert')).status).toBe(200);
    expect(seen).toEqual(['POST /upsert', 'POST /other', 'GET /entries/7', 'POST /upsert']);
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
});
