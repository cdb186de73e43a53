/**
 * The TypeScript node SDK against the real embedded stack, over real HTTP: a node registers, is approved by a
 * reviewer and beats; 1,000 truth writes made while the API process it talks to is killed and started again twice
 * all land exactly once, and no write() call did any network I/O; a held write follows its approval; a node restarted on the
 * same state dir sends what the last one left; a worker works the tasks an A2A client (@a2a-js/sdk) sends, and the
 * client sees their outcomes; a work order is pulled and acknowledged; tampered proofs and
 * checkpoints are reported; 429 and 503 are waited out as Retry-After asks; the node key never appears in the SDK's
 * log.
 */
import { spawn } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { HubNode, Outbox, VerificationError, type Logger, type NodeState } from '../../../sdk/typescript/src';
import { freePort, typescriptProcess } from '../../../scripts/stack/process';
import { issueHomologousToken, registerDid } from '../../support/credentials';
import { eventually, http, startTestService, type TestService } from '../../support/service';
import { HubProxy } from './hub-proxy';
import { getA2ATasks, replyA2ATask, sendA2AWork } from '../../support/a2a-client';
import { cosign, cosignatureVerifierKey } from '../../../core/tlog/cosignature.node';
import { TaskStore } from '../../../store/federation/tasks';
import { TaskCompletion, type TaskEvent } from '../../../sdk/typescript/src';

let svc: TestService;
let reviewer: string;
let did: string;
let verifierKey: string;
let api2: { url: string; stop(): Promise<void>; kill(): Promise<void> };
let api2Port: string;
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'node-sdk-'));
const nodes: HubNode[] = [];

/** Every line every node logged, as text (checked for the node key at the end). */
const logged: string[] = [];
const captureLogger: Logger = {
  debug: (m, f) => logged.push(`debug ${m} ${JSON.stringify(f ?? {})}`),
  info: (m, f) => logged.push(`info ${m} ${JSON.stringify(f ?? {})}`),
  warn: (m, f) => logged.push(`warn ${m} ${JSON.stringify(f ?? {})}`),
  error: (m, f) => logged.push(`error ${m} ${JSON.stringify(f ?? {})}`)
};

const startApi2 = async () => {
  api2 = await svc.startSecondApi({ PORT: api2Port });
};

function newNode(name: string, options: Partial<ConstructorParameters<typeof HubNode>[0]> = {}): HubNode {
  const node = new HubNode({
    hubUrl: api2.url,
    stateDir: path.join(scratch, name),
    did,
    verifierKey,
    register: { name, brand: { code: 'custom' }, capabilities: { declared: ['summarize'] } },
    heartbeatIntervalMs: 500,
    verifyIntervalMs: 300,
    heldPollMs: 300,
    maxBackoffMs: 2000,
    requestTimeoutMs: 5000,
    logger: captureLogger,
    ...options
  });
  nodes.push(node);
  return node;
}

/** The data part of the message an A2A client sent (the payload of a task made of a message is { message }). */
/** Starts a worker node, has a reviewer approve it, and waits until it is online. */
async function startOnline(node: HubNode): Promise<void> {
  await node.start();
  await http('POST', `${svc.urls.main}/a2a/review/approve`, {
    headers: { 'x-zr-token': reviewer },
    body: { node_id: node.nodeId, reason: 'worker' }
  });
  await eventually(async () => (node.state === 'online' ? true : undefined), 15_000, 'the worker online');
}

const dataOf = (payload: Record<string, unknown>): Record<string, number> =>
  (payload.message as { parts: Array<{ data?: Record<string, number> }> }).parts.find((p) => p.data)?.data ?? {};
const ledgerEntries = async (keyPrefix: string) =>
  (await svc.db.collection('ledger').find({ did }).toArray()).filter((e) => String(e.key).startsWith(keyPrefix));

beforeAll(async () => {
  svc = await startTestService({ TRUTH_DAILY_QUOTA: '100000', TASK_LEASE_S: '3' });
  reviewer = await issueHomologousToken(svc.urls.main, svc.adminToken);
  did = await registerDid(svc.urls.main, svc.adminToken, 'did:example:sdk-node');
  verifierKey = (await http('GET', `${svc.urls.main}/tlog/verifier-key`)).text.trim();
  api2Port = String(await freePort());
  await startApi2();
}, 90_000);

afterAll(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  await svc?.close();
  fs.rmSync(scratch, { recursive: true, force: true });
});

describe('joining and staying alive', () => {
  it('registers, keeps its credentials 0600, waits for review, then beats online', async () => {
    const node = newNode('joiner');
    const states: NodeState[] = [];
    node.on('state', (s: NodeState) => states.push(s));
    await node.start();
    expect(node.state).toBe('pending_review');
    const file = path.join(scratch, 'joiner', 'credentials.json');
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    const saved = JSON.parse(fs.readFileSync(file, 'utf8'));
    expect(saved).toMatchObject({ node_id: node.nodeId, hub_url: api2.url });

    const approved = await http('POST', `${svc.urls.main}/a2a/review/approve`, {
      headers: { 'x-zr-token': reviewer },
      body: { node_id: node.nodeId, reason: 'sdk test' }
    });
    expect(approved.status).toBe(200);
    await eventually(async () => (node.state === 'online' ? true : undefined), 15_000, 'the node online');
    expect(states).toEqual(['pending_review', 'online']);

    // A second client on the same state dir adopts the saved credentials instead of registering again.
    await node.stop();
    const again = newNode('joiner');
    await again.start();
    expect(again.nodeId).toBe(node.nodeId);
    await eventually(async () => (again.state === 'online' ? true : undefined), 15_000, 'the adopted node online');
    // A credentials file others can read is refused.
    await again.stop();
    fs.chmodSync(file, 0o644);
    const refused = newNode('joiner');
    await expect(refused.start()).rejects.toThrow(/can be read by others/);
    await refused.stop();
    fs.chmodSync(file, 0o600);
    // One outbox per state dir: a second client on it while the first runs is refused.
    const first = newNode('joiner', { heartbeat: false });
    expect(() => newNode('joiner', { heartbeat: false })).toThrow(/is in use by process/);
    await first.stop();
  });

  it('registers with a DID of its own linked to it; a DID linked already fails the registration', async () => {
    const own = await registerDid(svc.urls.main, svc.adminToken, 'did:example:sdk-linked-node');
    const node = newNode('linked', { register: { name: 'linked', did: own } });
    await node.start();
    expect(await svc.db.collection('dids').findOne({ _id: own as never })).toMatchObject({ node_id: node.nodeId });
    // X-DID alone now speaks for the node: its instruction queue answers to the DID.
    const inbox = await http('GET', `${svc.urls.main}/api/instructions/${node.nodeId}`, { headers: { 'x-did': own } });
    expect(inbox.status).toBe(200);
    await node.stop();
    const second = newNode('linked-again', { register: { name: 'linked-again', did: own } });
    await expect(second.start()).rejects.toThrow(/registration refused: 409/);
    await second.stop();
  });
});

describe('truth writes that never block', () => {
  it('lands 1,000 writes exactly once across two kills of the API process; write() does no I/O', async () => {
    let fetches = 0;
    const countingFetch: typeof fetch = (input, init) => {
      fetches++;
      return fetch(input, init);
    };
    const node = newNode('writer', { fetch: countingFetch, heartbeat: false });
    await node.start();
    // The approved node of the first test beats beside it: it must see itself offline while the API is away.
    const beater = newNode('joiner', { offlineAfterMs: 2000 });
    const beaterStates: NodeState[] = [];
    beater.on('state', (s: NodeState) => beaterStates.push(s));
    await beater.start();
    await eventually(async () => (beater.state === 'online' ? true : undefined), 10_000, 'the beater online');
    const handles = [];
    const callMs: number[] = [];
    const waitingAtRestarts: number[] = [];
    for (let i = 0; i < 1000; i++) {
      // SIGKILL at 200 and 600, started again 150 writes later each time.
      if (i === 200 || i === 600) await api2.kill();
      if (i === 350 || i === 750) {
        waitingAtRestarts.push(node.outbox.counts().pending);
        await startApi2();
      }
      const before = fetches;
      const t0 = performance.now();
      handles.push(node.write({ key: `sdk.restart.${i}`, value: { i, note: 'through a restart' } }));
      callMs.push(performance.now() - t0);
      // The call returned before any request was even started: it appended to the journal, nothing else.
      expect(fetches).toBe(before);
      if (i % 10 === 9) await new Promise((r) => setTimeout(r, 20));
    }
    await eventually(async () => (beater.state === 'online' ? true : undefined), 15_000, 'the beater back');
    // online, then offline while nothing got through for 2 s, then online again (a loaded machine may add a pair).
    expect(beaterStates[0]).toBe('online');
    expect(beaterStates.indexOf('offline')).toBeGreaterThan(0);
    expect(beaterStates[beaterStates.length - 1]).toBe('online');
    await beater.stop();
    // The writes made while the API was down (the 150 after each kill) were all still waiting for it.
    for (const waiting of waitingAtRestarts) expect(waiting).toBeGreaterThanOrEqual(150);
    const outcomes = await Promise.all(handles.map((h) => h.done));
    expect(outcomes.every((o) => o.state === 'acknowledged')).toBe(true);
    const seqs = outcomes.map((o) => (o.state === 'acknowledged' ? o.seq : 0));
    expect(new Set(seqs).size).toBe(1000);

    const entries = await ledgerEntries('sdk.restart.');
    expect(entries).toHaveLength(1000);
    expect(new Set(entries.map((e) => e.key)).size).toBe(1000);
    expect(node.outbox.counts()).toMatchObject({ pending: 0, held: 0, failed: 0 });

    // Every write is then proven included in a checkpoint the node verified.
    // One inclusion proof per write, 64 per round: about a minute for 1,000 on a loaded machine.
    await eventually(async () => (node.outbox.counts().unverified === 0 ? true : undefined), 150_000, 'all verified');
    // Proven writes leave the journal at its next compaction (here: the next open).
    await node.stop();
    const journal = path.join(scratch, 'writer', 'outbox.jsonl');
    expect(fs.readFileSync(journal, 'utf8').split('\n').length).toBeGreaterThan(2000);
    const reopened = new Outbox(journal);
    expect(reopened.list()).toEqual([]);
    reopened.close();
    expect(fs.readFileSync(journal, 'utf8')).toBe('');
    const sorted = [...callMs].sort((a, b) => a - b);
    console.log(
      `1000 write() calls: median ${sorted[500]!.toFixed(3)} ms, p99 ${sorted[990]!.toFixed(3)} ms, ` +
        `max ${sorted[999]!.toFixed(3)} ms, ${callMs.filter((t) => t > 1).length} over 1 ms ` +
        `(validate + journal append; fdatasync grouped off the call); pending at the restarts ${waitingAtRestarts}`
    );
  }, 300_000);

  it('sends, after a restart of the node, what the last run left in its outbox (even with a torn last line)', async () => {
    const dir = path.join(scratch, 'crasher');
    const offline = newNode('crasher', { hubUrl: 'http://127.0.0.1:9', heartbeat: false, verify: false });
    await offline.start();
    for (let i = 0; i < 20; i++) offline.write({ key: `sdk.crash.${i}`, value: { i } });
    // A write the hub would refuse fails the call itself, and never enters the outbox.
    expect(() => offline.write({ key: 'no-namespace', value: {} })).toThrow(TypeError);
    expect(() => offline.write({ key: 'hub.mine', value: {} })).toThrow(TypeError);
    expect(() => offline.write({ key: 'sdk.x', value: [] as never })).toThrow(TypeError);
    await offline.stop();
    fs.appendFileSync(path.join(dir, 'outbox.jsonl'), '{"t":"enq","id":"w_torn","key":"sdk.cra');

    const revived = newNode('crasher', { heartbeat: false });
    expect(revived.outbox.counts().pending).toBe(20);
    await revived.start();
    await eventually(async () => (revived.outbox.counts().pending === 0 ? true : undefined), 20_000, 'sent');
    const entries = await ledgerEntries('sdk.crash.');
    expect(entries.map((e) => e.key).sort()).toEqual(Array.from({ length: 20 }, (_, i) => `sdk.crash.${i}`).sort());
  });

  it('loses no returned write when the node process is killed with SIGKILL mid-stream', async () => {
    const dir = path.join(scratch, 'killed');
    const { binary, args } = typescriptProcess(path.join(__dirname, 'crash-child.ts'));
    const child = spawn(binary, [...args, api2.url, dir, did, '100000'], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    await eventually(async () => (out.split('\n').length > 300 ? true : undefined), 30_000, '300 writes returned');
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    // Every write whose write() returned (its line printed) must land exactly once once a new run sends the outbox.
    const returned = out
      .split('\n')
      .filter((l) => /^w_\S+ \d+$/.test(l))
      .map((l) => `sdk.kill.${l.split(' ')[1]}`);
    const revived = newNode('killed', { heartbeat: false, verify: false });
    const leftPending = revived.outbox.counts().pending;
    expect(leftPending).toBeGreaterThan(0); // the kill did interrupt the sending
    await revived.start();
    await eventually(async () => (revived.outbox.counts().pending === 0 ? true : undefined), 30_000, 'all sent');
    const landed = (await ledgerEntries('sdk.kill.')).map((e) => String(e.key));
    expect(new Set(landed).size).toBe(landed.length); // never twice
    const landedSet = new Set(landed);
    expect(returned.filter((k) => !landedSet.has(k))).toEqual([]); // every returned write is in
    console.log(
      `killed after ${returned.length} returned writes (${leftPending} not yet sent); ${landed.length} landed, each once`
    );
  }, 60_000);

  it('follows a held write to its approval, and a rejected one to its rejection', async () => {
    const node = newNode('holder', { heartbeat: false });
    await node.start();
    const risky = node.write({ key: 'sdk.held.approve', value: { plan: 'a' }, truth_type: 'risk' });
    const refused = node.write({ key: 'sdk.held.reject', value: { plan: 'b' }, truth_type: 'risk' });
    const approvalOf = async (id: string) =>
      eventually(async () => node.outbox.get(id)?.approval_id, 15_000, 'the write held');
    for (const [h, verb] of [
      [risky, 'approve'],
      [refused, 'reject']
    ] as const) {
      const approvalId = await approvalOf(h.id);
      expect(h.state()).toBe('held');
      const decided = await http('POST', `${svc.urls.main}/api/truth/approvals/${approvalId}/${verb}`, {
        headers: { 'x-zr-token': reviewer },
        body: { reason: 'sdk test' }
      });
      expect(decided.status).toBe(200);
    }
    await expect(risky.done).resolves.toMatchObject({ state: 'acknowledged', seq: expect.any(Number) });
    await expect(refused.done).resolves.toMatchObject({ state: 'rejected' });
    expect(await ledgerEntries('sdk.held.')).toHaveLength(1);
  }, 60_000);
});

describe('the worker loop', () => {
  it('claims matching tasks, renews leases past their length, completes, fails and honours a cancel', async () => {
    const events: TaskEvent[] = [];
    const node = newNode('worker', {
      heartbeat: true,
      register: { name: 'worker', capabilities: { declared: ['summarize'] } },
      worker: {
        maxTasks: 4,
        pollMs: 300,
        handler: async (task, ctx) => {
          // Several lines: the hub takes a one-line reason, which the worker makes of it.
          if (task.type === 'sdk.boom') throw new Error('boom\n  at the model');
          if (task.type === 'sdk.slow') {
            await new Promise((r) => setTimeout(r, 5000)); // longer than the 3 s lease
            return { slow: true };
          }
          if (task.type === 'sdk.wait') {
            await new Promise((r) => ctx.signal.addEventListener('abort', r));
            return { never: 'reported' };
          }
          return { echo: dataOf(task.payload).n };
        }
      }
    });
    node.on('task', (e: TaskEvent) => events.push(e));
    await startOnline(node);
    // The work comes from an A2A client (@a2a-js/sdk): one message per task, its type and capabilities in metadata.
    const client = { 'x-zr-token': reviewer };
    const work = (type: string, capabilities = ['summarize']) => ({
      messageId: `${type}-${Date.now()}`,
      taskType: type,
      capabilities,
      data: { n: 7 }
    });
    const task = async (id: string) =>
      (await http('GET', `${svc.urls.hub}/a2a/task/${id}`, { headers: { 'x-zr-token': reviewer } })).body.task;
    const [echo, slow, boom, wait, other] = await sendA2AWork(svc.urls.main, client, [
      work('sdk.echo'),
      work('sdk.slow'),
      work('sdk.boom'),
      work('sdk.wait'),
      work('sdk.gpu', ['gpu'])
    ]);
    await eventually(async () => (events.some((e) => e.task_id === wait) ? true : undefined), 10_000, 'claimed');
    expect((await new TaskStore(svc.db).cancel(wait!)).canceled).toBe(true);
    await eventually(
      async () =>
        [echo, slow, boom, wait].every((id) => events.some((e) => e.task_id === id && e.state !== 'claimed'))
          ? true
          : undefined,
      20_000,
      'every task settled'
    );
    expect(await task(echo!)).toMatchObject({ state: 'done', result: { echo: 7 } });
    expect(await task(slow!)).toMatchObject({ state: 'done', result: { slow: true }, attempts: 1 });
    expect(await task(boom!)).toMatchObject({ state: 'failed', error: 'boom at the model' });
    expect(await task(wait!)).toMatchObject({ state: 'canceled', result: null });
    expect(events.find((e) => e.task_id === wait && e.state !== 'claimed')?.state).toBe('canceled');
    expect(await task(other!)).toMatchObject({ state: 'queued' }); // needs a capability the node lacks
    // What the A2A client sees of the same tasks.
    const seen = await getA2ATasks(svc.urls.main, client, [echo!, boom!, wait!, other!]);
    expect(seen).toEqual([
      expect.objectContaining({ id: echo, state: 'TASK_STATE_COMPLETED', artifacts: [{ echo: 7 }] }),
      expect.objectContaining({ id: boom, state: 'TASK_STATE_FAILED', message: 'boom at the model' }),
      expect.objectContaining({ id: wait, state: 'TASK_STATE_CANCELED' }),
      expect.objectContaining({ id: other, state: 'TASK_STATE_SUBMITTED' })
    ]);
    await node.stop();
  }, 60_000);

  it('sends artifacts, asks its submitter for input, and answers the reply with a message (multi-turn A2A)', async () => {
    const events: TaskEvent[] = [];
    const seenHistory: unknown[][] = [];
    const node = newNode('conversing', {
      heartbeat: true,
      register: { name: 'conversing', capabilities: { declared: ['translate'] } },
      worker: {
        pollMs: 300,
        handler: async (task, ctx) => {
          seenHistory.push(task.history);
          if (task.history.length === 0) {
            await ctx.artifact({ artifactId: 'draft', parts: [{ text: 'first ' }] }, { lastChunk: false });
            await ctx.artifact({ artifactId: 'draft', parts: [{ text: 'draft' }] }, { append: true });
            await ctx.askForInput('Which language?');
            expect(ctx.signal.aborted).toBe(true); // nothing more is reported for this turn
            return { never: 'reported' };
          }
          const answer = task.history.at(-1) as { parts: { text?: string }[] };
          const language = answer.parts.map((p) => p.text ?? '').join('');
          return new TaskCompletion({ result: { language }, message: `translated into ${language}` });
        }
      }
    });
    node.on('task', (e: TaskEvent) => events.push(e));
    await startOnline(node);
    const client = { 'x-zr-token': reviewer };
    const [id] = await sendA2AWork(svc.urls.main, client, [
      { messageId: `ask-${Date.now()}`, taskType: 'sdk.translate', capabilities: ['translate'], data: { n: 1 } }
    ]);
    await eventually(
      async () => (events.some((e) => e.task_id === id && e.state === 'input_required') ? true : undefined),
      20_000,
      'the node asking for input'
    );
    // The stock A2A client sees the question and the artifact so far, then answers in the same task and context.
    const [waiting] = await getA2ATasks(svc.urls.main, client, [id!]);
    expect(waiting).toMatchObject({
      state: 'TASK_STATE_INPUT_REQUIRED',
      message: 'Which language?',
      texts: ['first draft']
    });
    await replyA2ATask(svc.urls.main, client, {
      taskId: id!,
      contextId: waiting!.context_id!,
      messageId: `answer-${Date.now()}`,
      text: 'French'
    });
    await eventually(
      async () => (events.some((e) => e.task_id === id && e.state === 'done') ? true : undefined),
      20_000,
      'the task done'
    );
    expect(seenHistory.length).toBe(2);
    expect(JSON.stringify(seenHistory[1])).toContain('Which language?');
    expect(JSON.stringify(seenHistory[1])).toContain('French');
    const [done] = await getA2ATasks(svc.urls.main, client, [id!]);
    expect(done).toMatchObject({
      state: 'TASK_STATE_COMPLETED',
      message: 'translated into French',
      texts: ['first draft'],
      artifacts: [{ language: 'French' }]
    });
    expect(events.filter((e) => e.task_id === id).map((e) => e.state)).toEqual([
      'claimed',
      'input_required',
      'claimed',
      'done'
    ]);
    await node.stop();
  }, 90_000);
});

describe('instructions', () => {
  it('pulls a work order pushed and approved for the node, acknowledges it once, and it leaves the queue', async () => {
    const node = newNode('reader', { did: 'did:example:sdk-orders', verify: false });
    await node.start();
    const admin = { authorization: `Bearer ${svc.adminToken}` };
    const dal = (body: Record<string, unknown>, asDid: string) =>
      http('POST', `${svc.urls.main}/dal/deploy`, { headers: { ...admin, 'x-did': asDid }, body });
    // The operator's side: a DID of the node's own (linked to it), and a work order for it, approved.
    await registerDid(svc.urls.main, svc.adminToken, 'did:example:sdk-orders');
    const linked = await dal(
      { action: 'did_register', did: 'did:example:sdk-orders', node_id: node.nodeId, autonomy_level: 0, channels: [] },
      'did:example:sdk-orders'
    );
    expect(linked.status).toBe(200);
    expect(await node.instructions()).toEqual([]);
    const order = {
      action: 'inbox_push',
      key: 'KERNEL.EVOLUTION.DIRECTIVE.tssdk',
      value: { directive_action: 'noop' }
    };
    const pushed = await dal({ ...order, node_id: node.nodeId }, did);
    expect(pushed.status).toBe(202);
    const { approval_id: approvalId, instruction_id: instructionId } = pushed.body;
    await eventually(
      async () =>
        (
          await http('POST', `${svc.urls.main}/api/truth/approvals/${approvalId}/approve`, {
            headers: { 'x-zr-token': reviewer },
            body: { reason: 'ts sdk' }
          })
        ).status === 200 || undefined,
      30_000,
      'the work order approved'
    );
    // The node's side: pull, acknowledge once, and the queue no longer lists it.
    const orders = await eventually(
      async () => ((await node.instructions()).length > 0 ? node.instructions() : undefined),
      30_000,
      'the work order queued'
    );
    expect(orders.map((o) => [o.instruction_id, o.value, o.acked_at])).toEqual([[instructionId, order.value, null]]);
    const acked = await node.ackInstruction(instructionId);
    expect(acked).toMatchObject({ instruction_id: instructionId, node_id: node.nodeId, already_acked: false });
    expect((await node.ackInstruction(instructionId)).already_acked).toBe(true);
    expect(await node.instructions()).toEqual([]);
    expect((await node.instructions({ includeAcked: true })).map((o) => o.acked_at !== null)).toEqual([true]);
    await expect(node.ackInstruction(`wo_${'0'.repeat(24)}`)).rejects.toMatchObject({ status: 404 });
    await node.stop();
  }, 60_000);
});

describe('verification and backoff through a proxy', () => {
  let proxy: HubProxy;
  beforeAll(async () => {
    proxy = await new HubProxy(svc.urls.main).start();
  });
  afterAll(() => proxy.close());

  it('reports a tampered inclusion proof and a forged checkpoint, and verifies once the answers are honest', async () => {
    const errors: Error[] = [];
    const node = newNode('verifier', { hubUrl: proxy.url, heartbeat: false });
    node.on('error', (e: Error) => errors.push(e));
    await node.start();
    proxy.tamperProof = true;
    const h = node.write({ key: 'sdk.verify.one', value: { checked: true } });
    await h.done;
    const inclusion = await eventually(
      async () => errors.find((e) => e instanceof VerificationError && e.kind === 'inclusion'),
      15_000,
      'an inclusion error'
    );
    expect(inclusion.message).toMatch(/not proven/);
    expect(node.outbox.get(h.id)?.verified_size).toBeUndefined();

    proxy.tamperProof = false;
    proxy.tamperCheckpoint = true;
    const h2 = node.write({ key: 'sdk.verify.two', value: { checked: true } });
    await h2.done;
    await eventually(
      async () => errors.find((e) => e instanceof VerificationError && e.kind === 'checkpoint_signature'),
      15_000,
      'a checkpoint signature error'
    );
    proxy.tamperCheckpoint = false;
    await eventually(async () => (node.outbox.counts().unverified === 0 ? true : undefined), 15_000, 'verified');
  });

  it('requires k of n witness cosignatures: waits without them, refuses a forged one, proves with them', async () => {
    // The test is the witness: its cosignature/v1 lines go on the hub's checkpoints through the proxy.
    const witness = generateKeyPairSync('ed25519');
    const impostor = generateKeyPairSync('ed25519');
    const raw = Buffer.from(witness.publicKey.export({ format: 'jwk' }).x!, 'base64url');
    const name = 'witness.test/sdk';
    const errors: Error[] = [];
    const node = newNode('witnessed', {
      hubUrl: proxy.url,
      heartbeat: false,
      witnesses: [cosignatureVerifierKey(name, raw)],
      witnessQuorum: 1
    });
    node.on('error', (e: Error) => errors.push(e));
    await node.start();
    const now = () => Math.floor(Date.now() / 1000);
    try {
      // No cosignature: the checkpoint proves nothing yet; the write waits, and no verification error is raised.
      const h = node.write({ key: 'sdk.witnessed.one', value: { witnessed: true } });
      await h.done;
      const asked = proxy.count('/tlog/checkpoint');
      await eventually(async () => (proxy.count('/tlog/checkpoint') >= asked + 3 ? true : undefined), 15_000, 'rounds');
      expect(node.outbox.get(h.id)?.verified_size).toBeUndefined();
      expect(errors).toEqual([]);
      // A line with the witness's name and key id signed by another key: a forgery.
      proxy.cosign = (text) => cosign(text, now(), name, impostor.privateKey, raw);
      await eventually(
        async () => errors.find((e) => e instanceof VerificationError && e.kind === 'checkpoint_cosignature'),
        15_000,
        'a cosignature error'
      );
      expect(node.outbox.get(h.id)?.verified_size).toBeUndefined();
      // The witness's own cosignature: the write is proven.
      proxy.cosign = (text) => cosign(text, now(), name, witness.privateKey, raw);
      await eventually(async () => (node.outbox.counts().unverified === 0 ? true : undefined), 15_000, 'verified');
    } finally {
      proxy.cosign = null;
    }
  });

  it('waits as long as Retry-After asks on 429 and 503, and the write still lands once', async () => {
    proxy.arrivals.length = 0;
    proxy.refuse.set('/api/report/truth', { status: 429, retryAfterS: 2, times: 1 });
    proxy.refuse.set('/a2a/heartbeat', { status: 503, retryAfterS: 2, times: 1 });
    const node = newNode('patient', { hubUrl: proxy.url });
    await node.start();
    const h = node.write({ key: 'sdk.backoff.one', value: { waited: true } });
    await expect(h.done).resolves.toMatchObject({ state: 'acknowledged' });
    await eventually(async () => (proxy.count('/a2a/heartbeat') >= 2 ? true : undefined), 10_000, 'a second beat');
    const gap = (prefix: string) => {
      const at = proxy.arrivals.filter((a) => a.path.startsWith(prefix)).map((a) => a.at);
      return at[1]! - at[0]!;
    };
    expect(gap('/api/report/truth')).toBeGreaterThanOrEqual(2000);
    expect(gap('/a2a/heartbeat')).toBeGreaterThanOrEqual(2000);
    expect(await ledgerEntries('sdk.backoff.')).toHaveLength(1);
  });
});

describe('secrets', () => {
  it('never writes a node key to the log', () => {
    const keys = fs
      .readdirSync(scratch)
      .map((d) => path.join(scratch, d, 'credentials.json'))
      .filter((f) => fs.existsSync(f))
      .map((f) => JSON.parse(fs.readFileSync(f, 'utf8')).api_key as string);
    expect(keys.length).toBeGreaterThanOrEqual(2);
    const text = logged.join('\n');
    expect(text).toMatch(/node registered/);
    expect(text).toMatch(/truth write deferred|failed to reach the hub/);
    for (const key of keys) expect(text).not.toContain(key);
  });
});
