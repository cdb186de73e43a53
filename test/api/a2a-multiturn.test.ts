/**
 * What a node can say to an A2A client through the hub, over real HTTP on both bindings (HTTP+JSON at /a2a,
 * JSON-RPC at /a2a/jsonrpc), as the official conformance kit (a2aproject/a2a-tck, 1.0-dev) asks it: input-required
 * and the client's follow-up reaching the same node (multi-turn), the task's history and historyLength, cancel of a
 * task waiting for input, a Message as the answer, file, url and data artifacts, artifacts streamed while working
 * (in order, chunks appended), a subscription that stays open across input-required, and Idempotency-Key in place
 * of messageId as the retry key. The node is test/support/tck-node.ts, answering the kit's messageId prefixes.
 */
import { issueHomologousToken } from '../support/credentials';
import { nodeHeaders, onlineWorkerNode, type RegisteredNode } from '../support/federation';
import { eventually, http, startTestService, TestService } from '../support/service';
import { sseEvents } from '../support/sse';
import { runTckNode } from '../support/tck-node';

let svc: TestService;
let token: string;
let node: RegisteredNode;
let running: { stop(): Promise<void> };

const V1 = { 'a2a-version': '1.0' };
const auth = () => ({ 'x-zr-token': token, ...V1 });
const session = Math.random().toString(16).slice(2, 10);
const user = (prefix: string, extra: Record<string, unknown> = {}) => ({
  messageId: `tck-${prefix}-${session}`,
  role: 'ROLE_USER',
  parts: [{ text: `text of ${prefix}` }],
  ...extra
});

type Binding = 'rest' | 'rpc';
/** SendMessage (blocking unless configured otherwise) on a binding: the answer ({ task } or { message }) or the error. */
async function send(binding: Binding, message: unknown, configuration?: unknown, headers: Record<string, string> = {}) {
  const params = { message, ...(configuration ? { configuration } : {}) };
  if (binding === 'rest') {
    const res = await http('POST', `${svc.urls.main}/a2a/message:send`, {
      headers: { ...auth(), ...headers },
      body: params
    });
    return res.status === 200 ? { ok: true, answer: res.body } : { ok: false, status: res.status, error: res.body };
  }
  const res = await http('POST', `${svc.urls.main}/a2a/jsonrpc`, {
    headers: { ...auth(), ...headers },
    body: { jsonrpc: '2.0', id: 1, method: 'SendMessage', params }
  });
  return res.body.result
    ? { ok: true, answer: res.body.result }
    : { ok: false, code: res.body.error?.code, error: res.body.error };
}
async function getTask(binding: Binding, id: string, historyLength?: number) {
  if (binding === 'rest') {
    const q = historyLength === undefined ? '' : `?historyLength=${historyLength}`;
    return (await http('GET', `${svc.urls.main}/a2a/tasks/${id}${q}`, { headers: auth() })).body;
  }
  // As the kit sends it: the proto field name.
  const params = historyLength === undefined ? { id } : { id, history_length: historyLength };
  return (
    await http('POST', `${svc.urls.main}/a2a/jsonrpc`, {
      headers: auth(),
      body: { jsonrpc: '2.0', id: 2, method: 'GetTask', params }
    })
  ).body.result;
}
const texts = (messages: any[]) => messages.flatMap((m) => (m.parts ?? []).map((p: any) => p.text));

beforeAll(async () => {
  svc = await startTestService({});
  token = await issueHomologousToken(svc.urls.main, svc.adminToken, 'a2a-multiturn');
  node = await onlineWorkerNode(svc, token, 'tck node');
  running = runTckNode(svc.urls.main, node);
}, 120_000);

afterAll(async () => {
  await running?.stop();
  await svc?.close();
});

describe.each<Binding>(['rest', 'rpc'])('on %s', (binding) => {
  test('input-required, then the follow-up (taskId alone) reaches the node and completes the task; history in order', async () => {
    const first = await send(binding, user('input-required'));
    expect(first.ok).toBe(true);
    const task = first.answer.task;
    expect(task.status.state).toBe('TASK_STATE_INPUT_REQUIRED');
    expect(task.contextId).toBeTruthy();

    // Asked again (the node's answer to this prefix), then completed.
    const again = await send(binding, user('input-required', { parts: [{ text: 'history 1' }], taskId: task.id }));
    expect(again.answer.task.status.state).toBe('TASK_STATE_INPUT_REQUIRED');
    const done = await send(binding, user('complete-task', { parts: [{ text: 'history 2' }], taskId: task.id }));
    expect(done.ok).toBe(true);
    expect(done.answer.task).toMatchObject({ id: task.id, contextId: task.contextId });
    expect(done.answer.task.status.state).toBe('TASK_STATE_COMPLETED');
    expect(texts(done.answer.task.history)).toEqual(['text of input-required', 'history 1', 'history 2']);
    expect(done.answer.task.history.map((m: any) => m.role)).toEqual(['ROLE_USER', 'ROLE_USER', 'ROLE_USER']);

    // historyLength: the newest N; 0 none.
    expect(texts((await getTask(binding, task.id, 1)).history)).toEqual(['history 2']);
    expect((await getTask(binding, task.id, 0)).history ?? []).toEqual([]);
    expect((await getTask(binding, task.id)).history).toHaveLength(3);

    // A final task takes no message; another context is refused; a task that does not exist is TaskNotFound.
    const late = await send(binding, user('terminal', { taskId: task.id }));
    expect(late.ok).toBe(false);
    expect(binding === 'rest' ? late.status : late.code).toBe(binding === 'rest' ? 400 : -32004);
    const missing = await send(binding, user('multi-004', { taskId: 'tck-nonexistent' }));
    expect(binding === 'rest' ? missing.status : missing.code).toBe(binding === 'rest' ? 404 : -32001);
  });

  test('a follow-up in another context is refused; a task waiting for input can be canceled', async () => {
    const task = (await send(binding, user('input-required'))).answer.task;
    const wrong = await send(binding, user('mismatch', { taskId: task.id, contextId: 'tck-wrong-context' }));
    expect(wrong.ok).toBe(false);
    expect((await getTask(binding, task.id)).status.state).toBe('TASK_STATE_INPUT_REQUIRED');

    const canceled =
      binding === 'rest'
        ? (await http('POST', `${svc.urls.main}/a2a/tasks/${task.id}:cancel`, { headers: auth() })).body
        : (
            await http('POST', `${svc.urls.main}/a2a/jsonrpc`, {
              headers: auth(),
              body: { jsonrpc: '2.0', id: 3, method: 'CancelTask', params: { id: task.id } }
            })
          ).body.result;
    expect(canceled).toMatchObject({ id: task.id, status: { state: 'TASK_STATE_CANCELED' } });
    expect((await send(binding, user('complete-task', { taskId: task.id }))).ok).toBe(false);
  });

  test('the node answers with a Message; artifacts of text, file bytes, file url and data come first', async () => {
    const reply = await send(binding, user('message-response'));
    expect(reply.answer.task).toBeUndefined();
    expect(reply.answer.message).toMatchObject({ role: 'ROLE_AGENT', parts: [{ text: 'Direct message response' }] });
    expect(reply.answer.message.messageId).toBeTruthy();

    const first = async (prefix: string) => (await send(binding, user(prefix))).answer.task.artifacts[0];
    expect((await first('artifact-text')).parts[0]).toEqual({ text: 'Generated text content' });
    expect((await first('artifact-file')).parts[0]).toEqual({
      raw: 'dGNr',
      filename: 'output.txt',
      mediaType: 'text/plain'
    });
    expect((await first('artifact-file-url')).parts[0]).toEqual({
      url: 'https://example.com/output.txt',
      filename: 'output.txt',
      mediaType: 'text/plain'
    });
    expect((await first('artifact-data')).parts[0]).toEqual({ data: { key: 'value', count: 42 } });
  });
});

const STATE_RANK: Record<string, number> = {
  TASK_STATE_SUBMITTED: 0,
  TASK_STATE_WORKING: 1,
  TASK_STATE_INPUT_REQUIRED: 1,
  TASK_STATE_COMPLETED: 2
};
const stateOf = (e: any) => e.statusUpdate?.status.state ?? e.task?.status.state;

test('a stream carries the task, then working, the artifacts as the node sends them (chunks appended), then completed, and closes', async () => {
  for (const prefix of ['stream-ordering-001', 'stream-artifact-chunked']) {
    const res = await fetch(`${svc.urls.main}/a2a/message:stream`, {
      method: 'POST',
      headers: { ...auth(), 'content-type': 'application/json' },
      body: JSON.stringify({ message: user(prefix) })
    });
    const events = await sseEvents(res);
    expect(Object.keys(events[0])).toEqual(['task']);
    const states = events.map(stateOf).filter(Boolean);
    for (let i = 1; i < states.length; i++)
      expect(STATE_RANK[states[i]]!).toBeGreaterThanOrEqual(STATE_RANK[states[i - 1]]!);
    expect(stateOf(events[events.length - 1])).toBe('TASK_STATE_COMPLETED');
    const working = events.findIndex((e) => e.statusUpdate?.status.state === 'TASK_STATE_WORKING');
    const artifacts = events.filter(
      (e) => e.artifactUpdate && !e.artifactUpdate.artifact.artifactId.endsWith('-result')
    );
    expect(working).toBeGreaterThan(0);
    expect(events.indexOf(artifacts[0])).toBeGreaterThan(working);
    if (prefix === 'stream-ordering-001') {
      expect(artifacts.map((e) => e.artifactUpdate.artifact.parts[0].text)).toEqual(['Ordered output']);
    } else {
      expect(
        artifacts.map((e) => [
          e.artifactUpdate.artifact.parts[0].text,
          e.artifactUpdate.append,
          e.artifactUpdate.lastChunk
        ])
      ).toEqual([
        ['chunk-1 ', true, false],
        ['chunk-2', true, true]
      ]);
      const task = await getTask('rest', events[0].task.id);
      expect(task.artifacts[0].parts).toEqual([{ text: 'chunk-1 ' }, { text: 'chunk-2' }]);
    }
  }
});

test('a subscription stays open while the task waits for input and ends after the follow-up completes it; two subscribers see the same events', async () => {
  const task = (await send('rest', user('input-required'))).answer.task;
  const subscribe = () => fetch(`${svc.urls.main}/a2a/tasks/${task.id}:subscribe`, { method: 'POST', headers: auth() });
  const [a, b] = await Promise.all([subscribe(), subscribe()]);
  let answered = false;
  const [eventsA, eventsB] = await Promise.all([
    sseEvents(a, async () => {
      if (answered) return;
      answered = true;
      // After the first event: the follow-up completes the task.
      setTimeout(() => void send('rest', user('complete-task', { taskId: task.id })), 300);
    }),
    sseEvents(b)
  ]);
  expect(eventsA[0]).toEqual(eventsB[0]);
  expect(eventsA[0].task.status.state).toBe('TASK_STATE_INPUT_REQUIRED');
  expect(stateOf(eventsA[eventsA.length - 1])).toBe('TASK_STATE_COMPLETED');
  expect(stateOf(eventsB[eventsB.length - 1])).toBe('TASK_STATE_COMPLETED');
});

test('a node asks a question: it is the status message and in the history; the node gets the answer in its task', async () => {
  // This test is the node (its own capability, so the kit's node leaves the task alone).
  const asker = await onlineWorkerNode(svc, token, 'asking node', ['ask']);
  const claim = async () =>
    (await http('POST', `${svc.urls.main}/api/task/assign`, { headers: nodeHeaders(asker), body: { max_tasks: 1 } }))
      .body.tasks;
  const sent = await send('rest', user('ask', { metadata: { required_capabilities: ['ask'] } }), {
    returnImmediately: true
  });
  const id = sent.answer.task.id;
  const [claimed] = await claim();
  expect(claimed.task_id).toBe(id);
  const asked = await http('POST', `${svc.urls.main}/api/task/${id}/input-required`, {
    headers: nodeHeaders(asker),
    body: { message: { parts: [{ text: 'Which language?' }] } }
  });
  expect(asked.status).toBe(200);
  expect(asked.body.task.state).toBe('input_required');
  // Waiting: no lease; progress is refused with the reason.
  expect(asked.body.task.lease_expires_at).toBeNull();
  const progress = await http('POST', `${svc.urls.main}/api/task/${id}/progress`, {
    headers: nodeHeaders(asker),
    body: {}
  });
  expect(progress.status).toBe(409);

  const waiting = await getTask('rest', id);
  expect(waiting.status).toMatchObject({
    state: 'TASK_STATE_INPUT_REQUIRED',
    message: { role: 'ROLE_AGENT', parts: [{ text: 'Which language?' }] }
  });
  expect(texts(waiting.history)).toEqual(['text of ask', 'Which language?']);
  const stats = await http('GET', `${svc.urls.main}/a2a/queue/stats`);
  expect(stats.body.input_required).toBeGreaterThanOrEqual(1);

  const answered = await send('rest', user('answer', { parts: [{ text: 'Go' }], taskId: id }), {
    returnImmediately: true
  });
  expect(answered.answer.task.status.state).toBe('TASK_STATE_WORKING');
  const [back] = await claim();
  expect(back.task_id).toBe(id);
  expect(back.claimed_by).toBe(asker.node_id);
  expect(back.history.map((m: any) => m.parts[0].text)).toEqual(['Which language?', 'Go']);
  const done = await http('POST', `${svc.urls.main}/api/task/${id}/complete`, {
    headers: nodeHeaders(asker),
    body: { result: { text: 'ok' } }
  });
  expect(done.body.task.state).toBe('done');
  expect(await claim()).toEqual([]);
});

test('Idempotency-Key is the retry key of a send; a reused messageId is a new message', async () => {
  const message = user('retry', { metadata: { required_capabilities: ['nobody'] } });
  const once = await send('rest', message, { returnImmediately: true }, { 'idempotency-key': `k-${session}` });
  const twice = await send('rest', message, { returnImmediately: true }, { 'idempotency-key': `k-${session}` });
  expect(twice.answer.task.id).toBe(once.answer.task.id);
  const other = await send('rest', message, { returnImmediately: true });
  expect(other.answer.task.id).not.toBe(once.answer.task.id);
});

test('a conversation survives its API process and the worker being killed between the turns', async () => {
  const message = (prefix: string, extra: Record<string, unknown> = {}) => ({ message: user(prefix, extra) });
  const first = await svc.startSecondApi();
  const asked = await http('POST', `${first.url}/a2a/message:send`, {
    headers: auth(),
    body: message('input-required')
  });
  expect(asked.body.task.status.state).toBe('TASK_STATE_INPUT_REQUIRED');
  const id = asked.body.task.id;
  await first.kill();
  await svc.killWorker();
  await svc.startWorker();
  const second = await svc.startSecondApi();
  try {
    const waiting = await http('GET', `${second.url}/a2a/tasks/${id}`, { headers: auth() });
    expect(waiting.body.status.state).toBe('TASK_STATE_INPUT_REQUIRED');
    const done = await http('POST', `${second.url}/a2a/message:send`, {
      headers: auth(),
      body: message('complete-task', { parts: [{ text: 'after the restart' }], taskId: id })
    });
    expect(done.body.task.status.state).toBe('TASK_STATE_COMPLETED');
    expect(texts(done.body.task.history)).toEqual(['text of input-required', 'after the restart']);
  } finally {
    await second.stop();
  }
});
