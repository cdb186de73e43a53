/**
 * Anonymous routes that create state are rate limited per client address: POST /a2a/register (which the join page's
 * form also calls) takes REGISTER_RATE_LIMIT_PER_MIN per minute, then answers 429 in the one error shape. The count
 * is kept in MongoDB, so it holds across API processes: two processes together admit the limit, not twice it.
 */
import { http, startTestService, TestService, waitAwayFromMinuteEnd } from '../support/service';

// Four registrations, each starting a node workflow: on a loaded 2-core machine that has taken over a minute.
jest.setTimeout(180_000);
let svc: TestService;
let secondUrl: string;

beforeAll(async () => {
  svc = await startTestService({ REGISTER_RATE_LIMIT_PER_MIN: '3' }, { worker: false });
  secondUrl = (await svc.startSecondApi()).url;
});
afterAll(async () => {
  await svc?.close();
});

it('answers 429 rate_limited with Retry-After past the per-address limit across API processes, and leaves other routes alone', async () => {
  // Eight at once, alternating between the two API processes: the limit is counted as each request arrives, so the
  // answer does not depend on how long a registration takes (on a loaded machine three in a row have outlasted the
  // one-minute window). Counted per process, each would have admitted three.
  await waitAwayFromMinuteEnd(5); // (windows are calendar minutes)
  const register = (i: number) =>
    http('POST', `${i % 2 === 0 ? svc.urls.main : secondUrl}/a2a/register`, {
      body: { name: `limited-${i}`, brand: { code: 'custom' } }
    });
  const answers = await Promise.all([0, 1, 2, 3, 4, 5, 6, 7].map(register));
  const accepted = answers.filter((r) => r.status !== 429);
  // No worker runs here, so the node workflows start but nothing else; each registration itself is accepted.
  expect(accepted.map((r) => r.status)).toEqual([201, 201, 201]);
  expect(accepted[0]!.headers.get('x-ratelimit-limit')).toBe('3');

  const refusedAll = answers.filter((r) => r.status === 429);
  expect(refusedAll).toHaveLength(5);
  const refused = refusedAll[0]!;
  expect(refused.body).toMatchObject({
    ok: false,
    error: 'rate_limited',
    limit: 3,
    trace_id: refused.headers.get('x-trace')
  });
  expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
  expect((await svc.db.collection('nodes').countDocuments({})).valueOf()).toBe(3);

  expect((await http('GET', `${svc.urls.main}/a2a/nodes`)).status).toBe(200);
  expect((await http('GET', `${secondUrl}/a2a/nodes`)).status).toBe(200);
});
