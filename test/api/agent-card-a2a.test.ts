/**
 * The A2A binding end to end. An A2A client (@a2a-js/sdk, unmodified, in a process of its own) resolves the card
 * from both paths, sends a message (a task no node can take: SUBMITTED, then canceled), streams a second message's
 * task to its end while a simulated worker node (over HTTP, as a node would) claims it, reports progress and
 * completes it, then gets, lists and cancels tasks and meets the protocol's typed errors. The card promises only what
 * answers. When the CI venv exists (scripts/ci/python-venv.sh), the Python SDK (a2a-sdk) runs a task's life too.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { runA2AClientScript } from '../support/a2a-client';
import { issueHomologousToken } from '../support/credentials';
import { heartbeat, nodeHeaders, onlineWorkerNode, RegisteredNode } from '../support/federation';
import { eventually, http, startTestService, TestService } from '../support/service';

const ROOT = path.resolve(__dirname, '..', '..');
/** The A2A-Version every request of the binding names (a missing one means 0.3, which the hub refuses). */
const V1 = { 'a2a-version': '1.0' };

let svc: TestService;
let token: string;
let worker: RegisteredNode;
/** What the JavaScript SDK saw (scripts/ci/check-agent-card.ts). */
let seen: Record<string, any>;
/** What the simulated worker did. */
const done: string[] = [];

const runScript = (headers: Record<string, string>) =>
  runA2AClientScript(path.join(ROOT, 'scripts/ci/check-agent-card.ts'), [svc.urls.main], headers, 120_000);

/** A worker node as it would run: heartbeat, claim what matches, report progress, complete with a result. */
async function workUntil(stop: () => boolean): Promise<void> {
  while (!stop()) {
    await heartbeat(svc.urls.main, worker);
    const claimed = await http('POST', `${svc.urls.main}/api/task/assign`, {
      headers: nodeHeaders(worker),
      body: { max_tasks: 5 }
    });
    if (claimed.status !== 200) throw new Error(`assign: ${claimed.status} ${claimed.text}`);
    for (const task of claimed.body.tasks) {
      const progress = await http('POST', `${svc.urls.main}/api/task/${task.task_id}/progress`, {
        headers: nodeHeaders(worker),
        body: { note: 'summarising' }
      });
      if (progress.status !== 200 || progress.body.canceled) continue;
      await new Promise((r) => setTimeout(r, 400));
      const text = `summary of ${JSON.stringify(task.payload.message.parts[0].text)}`;
      const complete = await http('POST', `${svc.urls.main}/api/task/${task.task_id}/complete`, {
        headers: nodeHeaders(worker),
        body: { result: { text, words: 3 } }
      });
      if (complete.status === 200) done.push(task.task_id);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

beforeAll(async () => {
  svc = await startTestService({});
  token = await issueHomologousToken(svc.urls.main, svc.adminToken, 'a2a-client');
  // Approved nodes are online while they heartbeat.
  worker = await onlineWorkerNode(svc, token, 'summariser', ['summarize']);
  // The card's capability skills come from the directory, which follows the node documents within about a second
  // (docs/federation.md#node-reads): the card is read once the directory lists the worker online.
  await eventually(
    async () => {
      const listed = await http('GET', `${svc.urls.main}/a2a/nodes?state=online`);
      return listed.body.nodes?.some((n: { node_id: string }) => n.node_id === worker.node_id) ? true : undefined;
    },
    15_000,
    'the directory to list the worker online'
  );
  let finished = false;
  const working = workUntil(() => finished);
  try {
    seen = JSON.parse(await runScript({ 'x-zr-token': token }));
  } finally {
    finished = true;
    await working;
  }
}, 240_000);

afterAll(async () => {
  await svc?.close();
});

// The SDK's enums: TaskState SUBMITTED 1, WORKING 2, COMPLETED 3, CANCELED 5.
test('both card paths resolve, with streaming on, the federation skill, a skill per online capability and the credentials the binding needs', () => {
  const card = seen.card;
  expect(seen.same_card_at_both_paths).toBe(true);
  expect(card.supportedInterfaces).toEqual([
    expect.objectContaining({ url: `${svc.urls.main}/a2a`, protocolBinding: 'HTTP+JSON', protocolVersion: '1.0' }),
    expect.objectContaining({ url: `${svc.urls.main}/a2a/jsonrpc`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' })
  ]);
  expect(card.capabilities).toMatchObject({ streaming: true, pushNotifications: false, extendedAgentCard: false });
  expect(card.securityRequirements.map((r: { schemes: Record<string, unknown> }) => Object.keys(r.schemes))).toEqual([
    ['external_node'],
    ['homologous'],
    ['oauth']
  ]);
  expect(card.skills[0]).toMatchObject({ id: 'federation', tags: expect.arrayContaining(['federation', 'tasks']) });
  // A skill per capability the online worker nodes declare (the simulated worker declares summarize).
  expect(card.skills[1]).toMatchObject({
    id: 'capability:summarize',
    tags: ['federation', 'tasks', 'summarize'],
    examples: ['metadata.required_capabilities: ["summarize"]']
  });
});

test('a message becomes a task; a worker node claims, runs and completes it while the client streams', () => {
  expect(seen.anonymous_send).toMatchObject({ ok: false });
  expect(seen.send_message).toMatchObject({ ok: true, value: { status: { state: 1 } } });
  expect(seen.send_message_stream.ok).toBe(true);
  const events: Array<{ payload: { $case: string; value: any } }> = seen.send_message_stream.value;
  expect(events[0]!.payload).toMatchObject({ $case: 'task', value: { status: { state: 1 } } });
  const cases = events.map((e) => `${e.payload.$case}:${e.payload.value.status?.state ?? ''}`);
  expect(cases).toContain('statusUpdate:2');
  expect(cases.slice(-2)).toEqual(['artifactUpdate:', 'statusUpdate:3']);
  const artifact = events[events.length - 2]!.payload.value.artifact;
  expect(artifact.parts[0].content).toEqual({ $case: 'text', value: expect.stringContaining('summary of') });
  const streamedId = events[0]!.payload.value.id;
  expect(done).toContain(streamedId);
  expect(seen.get_streamed).toMatchObject({
    ok: true,
    value: { id: streamedId, status: { state: 3 }, artifacts: [{ name: 'result' }] }
  });
  expect(seen.get_streamed.value.history[0].parts[0].content.value).toContain('please summarise');
});

test('get, list and cancel through the SDK client, with typed protocol errors', async () => {
  const heldId = seen.send_message.value.id;
  expect(seen.get_held).toMatchObject({ ok: true, value: { id: heldId, status: { state: 1 } } });
  expect(seen.list_tasks).toMatchObject({ ok: true, value: { totalSize: 2 } });
  expect(seen.list_tasks.value.tasks.map((t: { id: string }) => t.id)).toContain(heldId);
  expect(seen.cancel_held).toMatchObject({ ok: true, value: { id: heldId, status: { state: 5 } } });
  expect(seen.cancel_again).toMatchObject({ ok: false, error: 'TaskNotCancelableError' });
  expect(seen.get_unknown).toMatchObject({ ok: false, error: 'TaskNotFoundError' });
  expect(seen.get_push_config).toMatchObject({ ok: false, error: 'PushNotificationNotSupportedError' });
  // The queue saw the same (and the JSON-RPC run below): two done, two canceled.
  const stats = (await http('GET', `${svc.urls.main}/a2a/queue/stats`)).body;
  expect(stats).toMatchObject({ done: 2, canceled: 2, in_flight: 0 });
  expect(stats.mean_run_s).toEqual(expect.any(Number));
});

test('the same life over the JSON-RPC interface, with the SDK JSON-RPC transport and typed errors', () => {
  const rpc = seen.jsonrpc;
  expect(rpc.send_message).toMatchObject({ ok: true, value: { status: { state: 1 } } });
  const events: Array<{ payload: { $case: string; value: any } }> = rpc.send_message_stream.value;
  expect(rpc.send_message_stream.ok).toBe(true);
  expect(events[0]!.payload).toMatchObject({ $case: 'task', value: { status: { state: 1 } } });
  const cases = events.map((e) => `${e.payload.$case}:${e.payload.value.status?.state ?? ''}`);
  expect(cases.slice(-2)).toEqual(['artifactUpdate:', 'statusUpdate:3']);
  expect(done).toContain(events[0]!.payload.value.id);
  const heldId = rpc.send_message.value.id;
  expect(rpc.get_held).toMatchObject({ ok: true, value: { id: heldId, status: { state: 1 } } });
  expect(rpc.list_tasks.value.tasks.map((t: { id: string }) => t.id)).toContain(heldId);
  expect(rpc.cancel_held).toMatchObject({ ok: true, value: { id: heldId, status: { state: 5 } } });
  expect(rpc.cancel_again).toMatchObject({
    ok: false,
    error: 'TaskNotCancelableError',
    transport: 'jsonrpc',
    code: -32002
  });
  expect(rpc.get_unknown).toMatchObject({ ok: false, error: 'TaskNotFoundError', transport: 'jsonrpc', code: -32001 });
  expect(rpc.unsupported).toMatchObject({
    ok: false,
    error: 'UnsupportedOperationError',
    transport: 'jsonrpc',
    code: -32004
  });
  // The SDK refuses this one itself: the card says pushNotifications false.
  expect(rpc.get_push_config).toMatchObject({ ok: false, error: 'PushNotificationNotSupportedError' });
});

test('JSON-RPC: an unknown method, malformed params and a malformed envelope', async () => {
  const rpc = (body: unknown) =>
    http('POST', `${svc.urls.main}/a2a/jsonrpc`, { headers: { 'x-zr-token': token, ...V1 }, body });
  const unknown = await rpc({ jsonrpc: '2.0', id: 7, method: 'NoSuchMethod' });
  expect([unknown.status, unknown.body]).toEqual([
    200,
    { jsonrpc: '2.0', id: 7, error: { code: -32601, message: 'Method not found: NoSuchMethod' } }
  ]);
  const badParams = await rpc({ jsonrpc: '2.0', id: 'a', method: 'GetTask', params: { id: 5 } });
  expect([badParams.status, badParams.body.id, badParams.body.error.code]).toEqual([200, 'a', -32602]);
  // A body that is not a JSON-RPC 2.0 request is JSON-RPC's Invalid Request (test/api/a2a-conformance.test.ts: more).
  const envelope = await rpc({ jsonrpc: '1.0', id: 1, method: 'GetTask' });
  expect([envelope.status, envelope.body.id, envelope.body.error.code]).toEqual([200, 1, -32600]);
  expect(
    (await http('POST', `${svc.urls.main}/a2a/jsonrpc`, { body: { jsonrpc: '2.0', id: 1, method: 'ListTasks' } }))
      .status
  ).toBe(401);
});

test('a client that ignores the card still gets the binding typed errors, not a 404', async () => {
  const auth = { 'x-zr-token': token, ...V1 };
  const direct = async (method: string, p: string, body?: unknown) =>
    http(method, `${svc.urls.main}/a2a${p}`, { headers: auth, ...(body === undefined ? {} : { body }) });
  const msg = (extra: Record<string, unknown>) => ({
    message: { messageId: `m-${Math.random()}`, role: 'ROLE_USER', parts: [{ text: 'hi' }], ...extra }
  });
  const reasons = await Promise.all([
    direct('POST', '/message:send', msg({ taskId: 'task_000000000000000000000000' })),
    direct('POST', '/message:send', {
      message: {
        messageId: 'm-file',
        role: 'ROLE_USER',
        parts: [{ url: 'https://example.org/a.png', mediaType: 'image/png' }]
      }
    }),
    direct('GET', '/tasks/no-such:subscribe'),
    direct('GET', '/tasks/t-1/pushNotificationConfigs'),
    direct('GET', '/extendedAgentCard')
  ]);
  expect(reasons.map((r) => [r.status, r.body.error.details[0].reason])).toEqual([
    [404, 'TASK_NOT_FOUND'],
    [415, 'CONTENT_TYPE_NOT_SUPPORTED'],
    [404, 'TASK_NOT_FOUND'],
    [400, 'PUSH_NOTIFICATION_NOT_SUPPORTED'],
    [400, 'UNSUPPORTED_OPERATION']
  ]);
  const malformed = await direct('POST', '/message:send', { message: { role: 'ROLE_USER' } });
  expect([malformed.status, malformed.body.error.details[0].reason]).toEqual([400, 'INVALID_PARAMS']);
  const anonymous = await http('GET', `${svc.urls.main}/a2a/tasks`);
  expect([anonymous.status, anonymous.body.error.status]).toEqual([401, 'UNAUTHENTICATED']);
  // Another caller sees none of these tasks.
  const other = await issueHomologousToken(svc.urls.main, svc.adminToken, 'other-client');
  expect(
    (await http('GET', `${svc.urls.main}/a2a/tasks`, { headers: { 'x-zr-token': other, ...V1 } })).body
  ).toMatchObject({
    tasks: [],
    totalSize: 0
  });
});

test('every URL the card names is served', async () => {
  const card = (await http('GET', `${svc.urls.main}/.well-known/agent-card.json`)).body;
  const urls = new Set<string>([card.documentationUrl, card.provider.url]);
  for (const ext of card.capabilities.extensions) {
    urls.add(ext.uri);
    for (const [name, value] of Object.entries(ext.params ?? {}))
      if (name.endsWith('_url') || name.endsWith('_uri')) urls.add(value as string);
  }
  for (const url of urls) {
    expect(url.startsWith(svc.urls.main)).toBe(true);
    const res = await fetch(url, { redirect: 'manual' });
    expect({ url, status: res.status < 400 }).toEqual({ url, status: true });
  }
  // The interface answers (with credentials) rather than 404.
  expect(
    (await http('GET', `${card.supportedInterfaces[0].url}/tasks`, { headers: { 'x-zr-token': token, ...V1 } })).status
  ).toBe(200);
  expect(Object.keys(card.securitySchemes).sort()).toEqual(['did', 'external_node', 'homologous', 'oauth']);
  const oauth = card.securitySchemes.oauth.oauth2SecurityScheme;
  expect(oauth).toMatchObject({
    flows: { clientCredentials: { tokenUrl: `${svc.urls.main}/v1/oauth/token`, scopes: { a2a: expect.any(String) } } }
  });
  for (const url of [oauth.flows.clientCredentials.tokenUrl, oauth.oauth2MetadataUrl])
    expect({ url, served: (await fetch(url)).status !== 404 }).toEqual({ url, served: true });
});

/** An OAuth client's access token (client credentials) with these scopes. */
async function oauthToken(label: string, scopes: string[]): Promise<string> {
  const client = await http('POST', `${svc.urls.main}/admin/oauth-clients`, {
    headers: { authorization: `Bearer ${svc.adminToken}` },
    body: { label, scopes }
  });
  expect(client.status).toBe(201);
  const token = await http('POST', `${svc.urls.main}/v1/oauth/token`, {
    body: {
      grant_type: 'client_credentials',
      client_id: client.body.client_id,
      client_secret: client.body.client_secret
    }
  });
  expect(token.status).toBe(200);
  return token.body.access_token as string;
}

test('an OAuth client (client credentials, scope a2a) uses both bindings; a token without the scope is refused', async () => {
  const bearer = { authorization: `Bearer ${await oauthToken('a2a client', ['a2a'])}`, ...V1 };
  const sent = await http('POST', `${svc.urls.main}/a2a/message:send`, {
    headers: bearer,
    body: {
      message: {
        messageId: 'oauth-1',
        role: 'ROLE_USER',
        parts: [{ text: 'hi' }],
        metadata: { required_capabilities: ['nobody-declares-this'] }
      },
      configuration: { returnImmediately: true }
    }
  });
  expect([sent.status, sent.body.task.status.state]).toEqual([200, 'TASK_STATE_SUBMITTED']);
  const id = sent.body.task.id;
  // GetTask's historyLength: 0 leaves the history out, in both bindings; without it the message is there.
  const historyOf = async (query: string) =>
    (await http('GET', `${svc.urls.main}/a2a/tasks/${id}${query}`, { headers: bearer })).body.history;
  expect(await historyOf('')).toHaveLength(1);
  expect(await historyOf('?historyLength=0')).toEqual([]);
  expect(await historyOf('?historyLength=5')).toHaveLength(1);
  const rpcGet = await http('POST', `${svc.urls.main}/a2a/jsonrpc`, {
    headers: bearer,
    body: { jsonrpc: '2.0', id: 0, method: 'GetTask', params: { id, historyLength: 0 } }
  });
  expect(rpcGet.body.result.history).toEqual([]);
  // Media types: application/a2a+json (A2A 1.0.1's) is JSON; text/plain is 415, in the binding's error shape.
  const raw = (path: string, type: string, body: unknown) =>
    fetch(`${svc.urls.main}${path}`, {
      method: 'POST',
      headers: { ...bearer, 'content-type': type },
      body: JSON.stringify(body)
    });
  const a2aJson = await raw('/a2a/jsonrpc', 'application/a2a+json', {
    jsonrpc: '2.0',
    id: 9,
    method: 'GetTask',
    params: { id }
  });
  expect(a2aJson.status).toBe(200);
  expect(((await a2aJson.json()) as { result: { id: string } }).result.id).toBe(id);
  const plain = await raw('/a2a/message:send', 'text/plain', { message: { messageId: 'plain', role: 'ROLE_USER' } });
  expect(plain.status).toBe(415);
  expect(((await plain.json()) as { error: { code: number } }).error.code).toBe(415);
  const viaRpc = await http('POST', `${svc.urls.main}/a2a/jsonrpc`, {
    headers: bearer,
    body: { jsonrpc: '2.0', id: 1, method: 'ListTasks', params: {} }
  });
  expect(viaRpc.body.result.tasks.map((t: { id: string }) => t.id)).toEqual([id]); // only its own
  expect(
    (await http('GET', `${svc.urls.main}/a2a/tasks/${id}`, { headers: { 'x-zr-token': token, ...V1 } })).status
  ).toBe(404); // not the homologous caller's
  expect(
    (
      await http('POST', `${svc.urls.main}/a2a/jsonrpc`, {
        headers: bearer,
        body: { jsonrpc: '2.0', id: 2, method: 'CancelTask', params: { id } }
      })
    ).body.result.status.state
  ).toBe('TASK_STATE_CANCELED');
  const narrow = { authorization: `Bearer ${await oauthToken('compute only', ['compute'])}`, ...V1 };
  const refused = await http('GET', `${svc.urls.main}/a2a/tasks`, { headers: narrow });
  expect([refused.status, refused.body.error.status]).toEqual([403, 'PERMISSION_DENIED']);
  expect(refused.body.error.message).toContain("scope 'a2a'");
  expect(
    (
      await http('POST', `${svc.urls.main}/a2a/jsonrpc`, {
        headers: narrow,
        body: { jsonrpc: '2.0', id: 3, method: 'ListTasks' }
      })
    ).status
  ).toBe(403);
});

/** The CI venv (scripts/ci/python-venv.sh --path), or null when it has not been created on this machine. */
function pythonVenv(): string | null {
  const dir = execFileSync('bash', [path.join(ROOT, 'scripts/ci/python-venv.sh'), '--path'], {
    encoding: 'utf8'
  }).trim();
  return fs.existsSync(path.join(dir, '.complete')) ? dir : null;
}

test('the Python A2A SDK validates the card and runs a task through both bindings', async () => {
  const venv = pythonVenv();
  if (!venv) {
    if (process.env.CI) throw new Error('the CI venv is missing: .ci/run creates it with scripts/ci/python-venv.sh');
    console.warn('skipped: no Python venv (bash scripts/ci/python-venv.sh creates it)');
    return;
  }
  const run = spawnSync(
    path.join(venv, 'bin/python'),
    [path.join(ROOT, 'scripts/ci/check_agent_card.py'), svc.urls.main],
    {
      encoding: 'utf8',
      timeout: 60_000,
      env: { ...process.env, A2A_HEADERS: JSON.stringify({ 'X-ZR-Token': token }) }
    }
  );
  if (run.status !== 0)
    throw new Error(`check_agent_card.py failed (${run.status}):\n${run.stdout}\n${run.stderr.slice(-3000)}`);
  // The same with an OAuth access token (the card's oauth scheme) as the client's credentials.
  const bearer = await oauthToken('python a2a client', ['a2a']);
  const viaOauth = spawnSync(
    path.join(venv, 'bin/python'),
    [path.join(ROOT, 'scripts/ci/check_agent_card.py'), svc.urls.main],
    {
      encoding: 'utf8',
      timeout: 60_000,
      env: { ...process.env, A2A_HEADERS: JSON.stringify({ Authorization: `Bearer ${bearer}` }) }
    }
  );
  if (viaOauth.status !== 0)
    throw new Error(
      `check_agent_card.py with an OAuth token failed (${viaOauth.status}):\n${viaOauth.stdout}\n${viaOauth.stderr.slice(-3000)}`
    );
  expect(viaOauth.stdout).toContain('ok: CancelTask cancels it [JSONRPC]');
  expect(run.stdout).toContain('ok: card at /.well-known/agent-card.json resolves and has every REQUIRED field');
  for (const binding of ['HTTP+JSON', 'JSONRPC'])
    for (const line of [
      'ok: SendMessage queues a task (SUBMITTED)',
      'ok: GetTask answers the task',
      'ok: CancelTask cancels it',
      'ok: SendStreamingMessage streams the task until it is final (CANCELED)',
      'ok: GetTask of an unknown task answers TaskNotFoundError'
    ])
      expect(run.stdout).toContain(`${line} [${binding}]`);
});
