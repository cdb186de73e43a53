/**
 * With no provider configured the service still starts: /v1/models is an empty list and a completion answers
 * 404 model_not_found saying how to configure a provider.
 */
import OpenAI from 'openai';
import { http, startTestService, TestService } from '../support/service';

let svc: TestService;

beforeAll(async () => {
  svc = await startTestService({}, { worker: false });
});
afterAll(async () => {
  await svc?.close();
});

it('lists no models and explains how to configure a provider', async () => {
  const res = await http('POST', `${svc.urls.main}/admin/api-keys`, {
    headers: { authorization: `Bearer ${svc.adminToken}` },
    body: { plan: 'S1' }
  });
  const client = new OpenAI({ apiKey: res.body.api_key, baseURL: `${svc.urls.main}/v1`, maxRetries: 0 });
  expect((await client.models.list()).data).toEqual([]);
  const err = await client.chat.completions
    .create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] })
    .catch((e: unknown) => e);
  expect(err).toBeInstanceOf(OpenAI.NotFoundError);
  expect((err as InstanceType<typeof OpenAI.NotFoundError>).code).toBe('model_not_found');
  expect((err as Error).message).toContain('CHAT_PROVIDERS_FILE');
  const health = await http('GET', `${svc.urls.main}/health`);
  expect(health.body).toMatchObject({ ok: true, upstreams: [] });
});
