/**
 * Anonymous routes that create state are rate limited per client address: POST /a2a/register (which the join page's
 * form also calls) takes REGISTER_RATE_LIMIT_PER_MIN per minute, then answers 429 in the one error shape. The count
 * is kept in MongoDB (api/rate-limit-store.ts), so the limit holds across API processes: registrations alternating
 * between two processes are refused past the limit on both.
 */
import { http, startTestService, TestService } from '../support/service';

// Registrations each start a node workflow: on a loaded 2-core machine four of them have taken over a minute.
jest.setTimeout(180_000);
let svc: TestService;
let second: { url: string; stop(): Promise<void> };

beforeAll(async () => {
  svc = await startTestService({ REGISTER_RATE_LIMIT_PER_MIN: '3' }, { worker: false });
  second = await svc.startSecondApi();
});
afterAll(async () => {
  await second?.stop();
  await svc?.close();
});

/** Waits for the start of a minute-long window if less than 40 s of the current one are left. */
async function freshWindow(): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < 40_000) await new Promise((r) => setTimeout(r, left + 100));
}

it('answers 429 rate_limited with Retry-After past the per-address limit, counted across API processes, and leaves other routes alone', async () => {
  const register = (base: string, name: string) => http('POST', `${base}/a2a/register`, { body: { name, brand: { code: 'custom' } } });
  await freshWindow();
  const first = [];
  // Two through the first process, one through the second: three in all, the limit.
  for (const [i, base] of [svc.urls.main, second.url, svc.urls.main].entries()) first.push(await register(base, `limited-${i}`));
  // No worker runs here, so the node workflows start but nothing else; each registration itself is accepted.
  expect(first.map((r) => r.status)).toEqual([201, 201, 201]);
  expect(first[0]!.headers.get('x-ratelimit-limit')).toBe('3');
  expect(first.map((r) => r.headers.get('x-ratelimit-remaining'))).toEqual(['2', '1', '0']);

  for (const base of [second.url, svc.urls.main]) {
    const refused = await register(base, 'limited-3');
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ ok: false, error: 'rate_limited', limit: 3, trace_id: refused.headers.get('x-trace') });
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(Number(refused.headers.get('retry-after'))).toBeLessThanOrEqual(60);
  }
  expect((await svc.db.collection('nodes').countDocuments({})).valueOf()).toBe(3);

  expect((await http('GET', `${svc.urls.main}/a2a/nodes`)).status).toBe(200);
});
