/**
 * The A2A v1.0 binding's fidelity to the specification, over real HTTP on both interfaces (HTTP+JSON at /a2a,
 * JSON-RPC at /a2a/jsonrpc), for the points the official conformance kit (a2aproject/a2a-tck) checks and the hub
 * once got wrong: the A2A-Version service parameter, a message naming a task that does not exist, streamed status
 * updates without `final`, a client's undocumented Message members, malformed JSON-RPC bodies, ListTasks
 * (includeArtifacts, order, statusTimestampAfter, proto field names), GetExtendedAgentCard, and SubscribeToTask over
 * POST. A simulated worker node claims the tasks that need `conformance` and completes them over HTTP.
 */
import { issueHomologousToken } from '../support/credentials';
import { heartbeat, nodeHeaders, onlineWorkerNode, RegisteredNode } from '../support/federation';
import { eventually, http, startTestService, TestService } from '../support/service';
import { sseEvents } from '../support/sse';

let svc: TestService;
let token: string;
let worker: RegisteredNode;
let working: Promise<void>;
let stopWorking = false;

const V1 = { 'a2a-version': '1.0' };
const auth = () => ({ 'x-zr-token': token, ...V1 });
const rest = (method: string, path: string, body?: unknown, headers: Record<string, string> = auth()) =>
  http(method, `${svc.urls.main}/a2a${path}`, { headers, ...(body === undefined ? {} : { body }) });
const rpc = (method: string, params: unknown, headers: Record<string, string> = auth(), id: unknown = 1) =>
  http('POST', `${svc.urls.main}/a2a/jsonrpc`, { headers, body: { jsonrpc: '2.0', id, method, params } });
/** A raw body to the JSON-RPC route. */
const rpcRaw = (raw: string) =>
  http('POST', `${svc.urls.main}/a2a/jsonrpc`, {
    headers: { ...auth(), 'content-type': 'application/json' },
    raw
  });

let seq = 0;
const message = (capabilities: string[], extra: Record<string, unknown> = {}) => ({
  messageId: `conf-${Date.now()}-${seq++}`,
  role: 'ROLE_USER',
  parts: [{ text: 'conformance' }],
  metadata: { required_capabilities: capabilities },
  ...extra
});
/** Queues a task (returnImmediately) and answers it. */
async function queued(capabilities: string[], extra: Record<string, unknown> = {}) {
  const sent = await rest('POST', '/message:send', {
    message: message(capabilities, extra),
    configuration: { returnImmediately: true }
  });
  expect(sent.status).toBe(200);
  return sent.body.task as { id: string; contextId: string; status: { timestamp: string } };
}

/** A worker node: claims what needs `conformance`, completes it with a result. */
async function work(): Promise<void> {
  while (!stopWorking) {
    await heartbeat(svc.urls.main, worker);
    const claimed = await http('POST', `${svc.urls.main}/api/task/assign`, {
      headers: nodeHeaders(worker),
      body: { max_tasks: 5 }
    });
    for (const task of claimed.body?.tasks ?? []) {
      await http('POST', `${svc.urls.main}/api/task/${task.task_id}/progress`, {
        headers: nodeHeaders(worker),
        body: { note: 'working' }
      });
      await new Promise((r) => setTimeout(r, 350));
      await http('POST', `${svc.urls.main}/api/task/${task.task_id}/complete`, {
        headers: nodeHeaders(worker),
        body: { result: { text: 'done', payload_seen: task.payload } }
      });
    }
    await new Promise((r) => setTimeout(r, 150));
  }
}

beforeAll(async () => {
  svc = await startTestService({});
  token = await issueHomologousToken(svc.urls.main, svc.adminToken, 'a2a-conformance');
  worker = await onlineWorkerNode(svc, token, 'conformance worker', ['conformance']);
  working = work();
}, 120_000);

afterAll(async () => {
  stopWorking = true;
  await working?.catch(() => undefined);
  await svc?.close();
});

test('A2A-Version: 1.0 (a patch number ignored, or as a query parameter) is served; 99.0, empty and missing (0.3) are VersionNotSupported on both bindings', async () => {
  const before = (await rest('GET', '/tasks')).body.totalSize;
  const send = (headers: Record<string, string>) =>
    rest(
      'POST',
      '/message:send',
      { message: message(['nobody']), configuration: { returnImmediately: true } },
      headers
    );
  for (const version of ['99.0', '', undefined]) {
    const headers: Record<string, string> = { 'x-zr-token': token };
    if (version !== undefined) headers['a2a-version'] = version;
    const refused = await send(headers);
    expect([refused.status, refused.body.error.status, refused.body.error.details[0]]).toEqual([
      400,
      'FAILED_PRECONDITION',
      {
        '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
        reason: 'VERSION_NOT_SUPPORTED',
        domain: 'a2a-protocol.org',
        metadata: { requestedVersion: version ? '99.0' : '0.3', supportedVersions: '1.0' }
      }
    ]);
    expect(refused.body.error.message).toContain('serves 1.0');
    const viaRpc = await rpc('SendMessage', { message: message(['nobody']) }, headers, 'v');
    expect([viaRpc.status, viaRpc.body.id, viaRpc.body.error.code, viaRpc.body.error.data[0].reason]).toEqual([
      200,
      'v',
      -32009,
      'VERSION_NOT_SUPPORTED'
    ]);
  }
  // Every operation reads it, reads too.
  expect((await rest('GET', '/tasks', undefined, { 'x-zr-token': token })).status).toBe(400);
  expect((await rest('GET', '/tasks/task_000000000000000000000000', undefined, { 'x-zr-token': token })).status).toBe(
    400
  );
  // Nothing was queued by the refused sends.
  expect((await rest('GET', '/tasks')).body.totalSize).toBe(before);
  expect((await send({ 'x-zr-token': token, 'a2a-version': '1.0.3' })).status).toBe(200);
  const byQuery = await http('GET', `${svc.urls.main}/a2a/tasks?A2A-Version=1.0`, { headers: { 'x-zr-token': token } });
  expect([byQuery.status, byQuery.body.totalSize]).toEqual([200, before + 1]);
  expect((await rpc('ListTasks', {}, { 'x-zr-token': token, 'a2a-version': '1.0' })).body.result.totalSize).toBe(
    before + 1
  );
});

test("a message naming a task that does not exist (or is another caller's) is TaskNotFound; naming one of the caller's is UnsupportedOperation", async () => {
  const mine = await queued(['nobody']);
  const missing = { taskId: 'task_000000000000000000000000' };
  const notFound = await rest('POST', '/message:send', { message: message([], missing) });
  expect([notFound.status, notFound.body.error.status, notFound.body.error.details[0].reason]).toEqual([
    404,
    'NOT_FOUND',
    'TASK_NOT_FOUND'
  ]);
  expect((await rest('POST', '/message:stream', { message: message([], { taskId: 'nope' }) })).status).toBe(404);
  expect((await rpc('SendMessage', { message: message([], missing) })).body.error.code).toBe(-32001);
  expect((await rpc('SendStreamingMessage', { message: message([], missing) })).body.error.code).toBe(-32001);
  const other = await issueHomologousToken(svc.urls.main, svc.adminToken, 'another caller');
  const theirs = await rest(
    'POST',
    '/message:send',
    { message: message([], { taskId: mine.id }) },
    {
      'x-zr-token': other,
      ...V1
    }
  );
  expect([theirs.status, theirs.body.error.details[0].reason]).toEqual([404, 'TASK_NOT_FOUND']);
  const own = await rest('POST', '/message:send', { message: message([], { taskId: mine.id }) });
  expect([own.status, own.body.error.details[0].reason]).toEqual([400, 'UNSUPPORTED_OPERATION']);
  expect((await rpc('SendMessage', { message: message([], { taskId: mine.id }) })).body.error.code).toBe(-32004);
});

test('streamed status updates carry no `final`; the stream ends after the final one, on both bindings', async () => {
  const rest_ = await fetch(`${svc.urls.main}/a2a/message:stream`, {
    method: 'POST',
    headers: { ...auth(), 'content-type': 'application/json' },
    body: JSON.stringify({ message: message(['conformance']) })
  });
  const events = await sseEvents(rest_);
  expect(Object.keys(events[0])).toEqual(['task']);
  const updates = events.filter((e) => e.statusUpdate).map((e) => e.statusUpdate);
  expect(updates.length).toBeGreaterThan(0);
  for (const u of updates) expect(Object.keys(u).sort()).toEqual(['contextId', 'status', 'taskId']);
  expect(updates[updates.length - 1].status.state).toBe('TASK_STATE_COMPLETED');
  expect(events[events.length - 1]).toHaveProperty('statusUpdate');

  const viaRpc = await fetch(`${svc.urls.main}/a2a/jsonrpc`, {
    method: 'POST',
    headers: { ...auth(), 'content-type': 'application/json' },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 's',
      method: 'SendStreamingMessage',
      params: { message: message(['conformance']) }
    })
  });
  const rpcEvents = await sseEvents(viaRpc);
  expect(rpcEvents.every((e) => e.jsonrpc === '2.0' && e.id === 's')).toBe(true);
  const rpcUpdates = rpcEvents.filter((e) => e.result.statusUpdate).map((e) => e.result.statusUpdate);
  for (const u of rpcUpdates) expect(u).not.toHaveProperty('final');
  expect(rpcUpdates[rpcUpdates.length - 1].status.state).toBe('TASK_STATE_COMPLETED');
});

test("a client's undocumented Message and Part members are neither stored nor served back, nor handed to the node", async () => {
  const sent = await rest('POST', '/message:send', {
    message: {
      ...message(['conformance']),
      kind: 'message',
      custom: { x: 1 },
      parts: [{ text: 'strip me', kind: 'text', bogus: true, metadata: { kept: 'yes' } }],
      extensions: ['https://example.org/ext/v1'],
      referenceTaskIds: ['task_000000000000000000000000']
    }
  });
  expect(sent.status).toBe(200);
  const id = sent.body.task.id;
  const documented = ['extensions', 'messageId', 'metadata', 'parts', 'referenceTaskIds', 'role'];
  const check = (history: any[]) => {
    expect(Object.keys(history[0]).sort()).toEqual(documented);
    expect(history[0].parts).toEqual([{ text: 'strip me', metadata: { kept: 'yes' } }]);
  };
  check(sent.body.task.history);
  check((await rest('GET', `/tasks/${id}`)).body.history);
  check((await rpc('GetTask', { id })).body.result.history);
  const stored = await svc.db.collection('tasks').findOne({ _id: id as never });
  expect(stored!.payload_json).not.toContain('bogus');
  expect(stored!.payload_json).not.toContain('custom');
  // The node got the documented message (its result echoes the payload it claimed).
  const done = await eventually(async () => {
    const t = (await rest('GET', `/tasks/${id}`)).body;
    return t.status.state === 'TASK_STATE_COMPLETED' ? t : undefined;
  });
  const seen = done.artifacts[0].parts.find((p: any) => p.data).data.payload_seen.message;
  expect(Object.keys(seen).sort()).toEqual(documented);
  // The task's own metadata is named in the protocol's camelCase.
  expect(done.metadata).toEqual({
    taskType: 'a2a.message',
    requiredCapabilities: ['conformance'],
    priority: 5,
    attempts: 1,
    claimedBy: worker.node_id
  });
});

test('malformed JSON-RPC bodies are JSON-RPC errors: -32700 for invalid JSON, -32600 for what is not a request; REST keeps its shape', async () => {
  const parse = await rpcRaw('{"jsonrpc": "2.0", "id": 3, "method": ');
  expect([parse.status, parse.body.jsonrpc, parse.body.id, parse.body.error.code]).toEqual([200, '2.0', null, -32700]);
  const duplicate = await rpcRaw('{"jsonrpc": "2.0", "id": 3, "id": 4, "method": "GetTask"}');
  expect([duplicate.status, duplicate.body.id, duplicate.body.error.code]).toEqual([200, null, -32700]);
  const cases: Array<[unknown, unknown]> = [
    [{ id: 5, method: 'GetTask', params: { id: 'x' } }, 5], // no jsonrpc
    [{ jsonrpc: '1.0', id: 'a', method: 'GetTask' }, 'a'], // not 2.0
    [{ jsonrpc: '2.0', id: 6 }, 6], // no method
    [{ jsonrpc: '2.0', id: 7, method: 42 }, 7],
    [{ jsonrpc: '2.0', id: { not: 'an id' }, method: 'GetTask' }, null],
    [{ jsonrpc: '2.0', id: '0'.repeat(201), method: '0', params: {} }, null], // an id too long to echo
    [[{ jsonrpc: '2.0', id: 8, method: 'GetTask' }], null], // a batch
    ['just a string', null]
  ];
  for (const [body, id] of cases) {
    const res = await rpcRaw(JSON.stringify(body));
    expect({ body, status: res.status, reply: res.body }).toEqual({
      body,
      status: 200,
      reply: { jsonrpc: '2.0', id, error: { code: -32600, message: expect.stringContaining('Invalid Request') } }
    });
  }
  const empty = await rpcRaw('');
  expect([empty.status, empty.body.error.code]).toEqual([200, -32600]);
  // A body of another media type: ContentTypeNotSupported, as the reference SDKs' servers answer it.
  const plain = await http('POST', `${svc.urls.main}/a2a/jsonrpc`, {
    headers: { ...auth(), 'content-type': 'text/plain' },
    raw: JSON.stringify({ jsonrpc: '2.0', id: 11, method: 'GetTask', params: { id: 'x' } })
  });
  expect([plain.status, plain.body.id, plain.body.error.code, plain.body.error.data[0].reason]).toEqual([
    200,
    null,
    -32005,
    'CONTENT_TYPE_NOT_SUPPORTED'
  ]);
  // Method not found and invalid params keep their codes, with the id.
  expect((await rpc('NoSuchMethod', {}, auth(), 9)).body).toMatchObject({ id: 9, error: { code: -32601 } });
  expect((await rpc('GetTask', { id: 5 }, auth(), 10)).body).toMatchObject({ id: 10, error: { code: -32602 } });
  // No credentials: refused before any JSON-RPC is read.
  const anonymous = await http('POST', `${svc.urls.main}/a2a/jsonrpc`, { headers: V1, raw: '{' });
  expect(anonymous.status).toBe(401);
  // The HTTP+JSON binding answers invalid JSON in its own shape.
  const restParse = await http('POST', `${svc.urls.main}/a2a/message:send`, {
    headers: { ...auth(), 'content-type': 'application/json' },
    raw: '{"message": '
  });
  expect([restParse.status, restParse.body.error.code, restParse.body.error.status]).toEqual([
    400,
    400,
    'INVALID_ARGUMENT'
  ]);
});

test('ListTasks: artifacts only with includeArtifacts, filtered lists by status timestamp (latest first), statusTimestampAfter, proto field names', async () => {
  const contextId = `ctx-${Date.now()}`;
  const first = await queued(['nobody'], { contextId });
  const second = await queued(['conformance'], { contextId });
  // The worker completes the second; the first is canceled after that, so its status is the latest.
  await eventually(async () =>
    (await rest('GET', `/tasks/${second.id}`)).body.status.state === 'TASK_STATE_COMPLETED' ? true : undefined
  );
  await new Promise((r) => setTimeout(r, 20));
  const canceled = await rest('POST', `/tasks/${first.id}:cancel`);
  expect(canceled.body.status.state).toBe('TASK_STATE_CANCELED');

  const listed = await rest('GET', `/tasks?contextId=${contextId}`);
  expect(listed.body.tasks.map((t: any) => t.id)).toEqual([first.id, second.id]);
  for (const t of listed.body.tasks) expect(t).not.toHaveProperty('artifacts');
  const withArtifacts = await rest('GET', `/tasks?contextId=${contextId}&includeArtifacts=true`);
  expect(withArtifacts.body.tasks.map((t: any) => t.artifacts.length)).toEqual([0, 1]);
  // Proto field names, as ProtoJSON parsers take them, on both bindings.
  const proto = await rest('GET', `/tasks?context_id=${contextId}&page_size=1&include_artifacts=true&history_length=0`);
  expect(proto.body).toMatchObject({ pageSize: 1, totalSize: 2, nextPageToken: '1' });
  expect(proto.body.tasks).toEqual([expect.objectContaining({ id: first.id, artifacts: [], history: [] })]);
  const page2 = await rest('GET', `/tasks?context_id=${contextId}&page_size=1&page_token=1`);
  expect(page2.body.tasks.map((t: any) => t.id)).toEqual([second.id]);
  const viaRpc = await rpc('ListTasks', { context_id: contextId, include_artifacts: true, history_length: 0 });
  expect(viaRpc.body.result.tasks.map((t: any) => [t.id, t.artifacts.length, t.history.length])).toEqual([
    [first.id, 0, 0],
    [second.id, 1, 0]
  ]);
  const rpcDefault = await rpc('ListTasks', { contextId });
  for (const t of rpcDefault.body.result.tasks) expect(t).not.toHaveProperty('artifacts');
  // statusTimestampAfter: the tasks whose status changed at or after it.
  const since = canceled.body.status.timestamp;
  const recent = await rest('GET', `/tasks?statusTimestampAfter=${encodeURIComponent(since)}`);
  expect(recent.body.tasks.map((t: any) => t.id)).toEqual([first.id]);
  const recentRpc = await rpc('ListTasks', { status_timestamp_after: since, context_id: contextId });
  expect(recentRpc.body.result.tasks.map((t: any) => t.id)).toEqual([first.id]);
  expect((await rest('GET', '/tasks?statusTimestampAfter=yesterday')).status).toBe(400);
  // A state the hub never holds matches nothing; the SDKs' unset value filters nothing.
  expect((await rest('GET', '/tasks?status=TASK_STATE_INPUT_REQUIRED')).body).toMatchObject({
    tasks: [],
    totalSize: 0
  });
  expect((await rest('GET', `/tasks?contextId=${contextId}&status=TASK_STATE_UNSPECIFIED`)).body.totalSize).toBe(2);
  // Unfiltered: newest submitted first (docs/a2a.md: why not by status timestamp).
  const all = (await rest('GET', '/tasks?pageSize=100')).body.tasks.map((t: any) => t.id);
  expect(all.indexOf(second.id)).toBeLessThan(all.indexOf(first.id));
});

test('GetExtendedAgentCard while the card has none is UnsupportedOperation on both bindings; the card has a Last-Modified', async () => {
  const served = await http('GET', `${svc.urls.main}/.well-known/agent-card.json`);
  const card = served.body;
  expect(card.capabilities.extendedAgentCard).toBe(false);
  const modified = Date.parse(served.headers.get('last-modified') ?? '');
  expect(modified).toBeLessThanOrEqual(Date.now());
  expect(modified).toBeGreaterThan(Date.now() - 10 * 60_000);
  const viaRest = await rest('GET', '/extendedAgentCard');
  expect([viaRest.status, viaRest.body.error.status, viaRest.body.error.details[0].reason]).toEqual([
    400,
    'FAILED_PRECONDITION',
    'UNSUPPORTED_OPERATION'
  ]);
  const viaRpc = await rpc('GetExtendedAgentCard', {});
  expect([viaRpc.body.error.code, viaRpc.body.error.data[0].reason]).toEqual([-32004, 'UNSUPPORTED_OPERATION']);
});

test('SubscribeToTask is served over POST (the specification) as over GET (a2a.proto)', async () => {
  for (const method of ['POST', 'GET']) {
    const task = await queued(['nobody']);
    const res = await fetch(`${svc.urls.main}/a2a/tasks/${task.id}:subscribe`, { method, headers: auth() });
    expect(res.status).toBe(200);
    let canceled = false;
    const events = await sseEvents(res, async (event) => {
      if (event.task && !canceled) {
        canceled = true;
        expect((await rest('POST', `/tasks/${task.id}:cancel`)).status).toBe(200);
      }
    });
    expect(events[0].task.id).toBe(task.id);
    expect(events[events.length - 1].statusUpdate.status.state).toBe('TASK_STATE_CANCELED');
    const final = await fetch(`${svc.urls.main}/a2a/tasks/${task.id}:subscribe`, { method, headers: auth() });
    expect([final.status, ((await final.json()) as any).error.details[0].reason]).toEqual([
      400,
      'UNSUPPORTED_OPERATION'
    ]);
  }
});

test('JSON-RPC is served at the card URL with a trailing slash too (clients that post to "<url>/")', async () => {
  const slash = `${svc.urls.main}/a2a/jsonrpc/`;
  const task = await queued(['nobody']);
  const got = await http('POST', slash, {
    headers: auth(),
    body: { jsonrpc: '2.0', id: 7, method: 'GetTask', params: { id: task.id } }
  });
  expect(got.status).toBe(200);
  expect(got.body).toMatchObject({ jsonrpc: '2.0', id: 7, result: { id: task.id } });
  const unparsable = await http('POST', slash, {
    headers: { ...auth(), 'content-type': 'application/json' },
    raw: '{"jsonrpc":'
  });
  expect(unparsable.body).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32700 } });
  const version = await http('POST', slash, {
    headers: { 'x-zr-token': token, 'a2a-version': '99.0' },
    body: { jsonrpc: '2.0', id: 8, method: 'GetTask', params: { id: task.id } }
  });
  expect(version.body).toMatchObject({ id: 8, error: { code: -32009 } });
});
