/**
 * Anonymous routes that create state are rate limited per client address: POST /a2a/register (which the join page's
 * form also calls) takes REGISTER_RATE_LIMIT_PER_MIN per minute, then answers 429 in the one error shape.
 */
import { http, startTestService, TestService } from '../support/service';

// Four registrations, each starting a node workflow: on a loaded 2-core machine that has taken over a minute.
jest.setTimeout(180_000);
let svc: TestService;

beforeAll(async () => {
  svc = await startTestService({ REGISTER_RATE_LIMIT_PER_MIN: '3' }, { worker: false });
});
afterAll(async () => {
  await svc?.close();
});

it('answers 429 rate_limited with Retry-After past the per-address limit, and leaves other routes alone', async () => {
  const register = (name: string) => http('POST', `${svc.urls.main}/a2a/register`, { body: { name, brand: { code: 'custom' } } });
  // All four at once: the limit is counted as each request arrives, so the answer does not depend on how long a
  // registration takes (on a loaded machine three in a row have outlasted the one-minute window).
  const answers = await Promise.all([0, 1, 2, 3].map((i) => register(`limited-${i}`)));
  const accepted = answers.filter((r) => r.status !== 429);
  // No worker runs here, so the node workflows start but nothing else; each registration itself is accepted.
  expect(accepted.map((r) => r.status)).toEqual([201, 201, 201]);
  expect(accepted[0]!.headers.get('x-ratelimit-limit')).toBe('3');

  const refused = answers.find((r) => r.status === 429)!;
  expect(refused).toBeDefined();
  expect(refused.body).toMatchObject({ ok: false, error: 'rate_limited', limit: 3, trace_id: refused.headers.get('x-trace') });
  expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
  expect((await svc.db.collection('nodes').countDocuments({})).valueOf()).toBe(3);

  expect((await http('GET', `${svc.urls.main}/a2a/nodes`)).status).toBe(200);
});
