/**
 * What bench:reads' reads touch besides the ledger, made once per data dir (a kept one is topped up to the counts
 * asked for), each by the fastest path the project has for it:
 *   credentials   the reader's and the writers' DIDs and a homologous token through the admin API (as bench:ledger
 *                 registers its DIDs), a chat key through CredentialStore.issueApiKey (the admin API would add a
 *                 ledger event per key);
 *   nodes         NodeStore.insertWithNextSequence in rounds of 200 (registration's own storage path,
 *                 without its per-node workflow: POST /a2a/register starts one each, 150 s for 10,000 in
 *                 bench:heartbeat): 80 % online, 10 % offline, 10 % pending_review, all with one bench API key; then
 *                 one heartbeat per online node over HTTP, so presence holds their samples (the stack runs with
 *                 NODE_OFFLINE_AFTER_S of a day, so they stay online without beating and no transition is recorded);
 *   GPU records   GpuStore.upsert for every tenth online node (the route's own store call);
 *   work orders   WorkOrderStore.insert (what the work-order workflow's activity writes once an order is approved):
 *                 20 for the node whose queue is read, one each for every tenth other node;
 *   tasks         A2A messages queued by the A2A binding's own operation (createA2aTasks().queue), half sent by
 *                 the bench's homologous token (ListTasks pages them), half by nodes;
 *   chat keys     CredentialStore.issueApiKey, each with usage records (ChatUsageStore.record) over the last 7 days;
 *   proposals     20 open directory-tree proposals through POST /a2a/directory-tree/propose.
 */
import { randomBytes } from 'node:crypto';
import type { Db } from 'mongodb';
import { hashSecret, newSecret } from '../../core/credentials.node';
import { BRAND_CODES, formatNodeId, type NodeState } from '../../core/federation/vocabulary';
import { createA2aTasks } from '../../services/a2a/a2a-tasks';
import { ChatUsageStore } from '../../store/chat/usage';
import { GpuStore } from '../../store/compute/gpu';
import { CredentialStore } from '../../store/credentials';
import { WorkOrderStore } from '../../store/deploy/work-orders';
import type { NodeDocument } from '../../store/federation/node-document';
import { HeartbeatHistoryStore } from '../../store/federation/heartbeat-history';
import { NodeStore } from '../../store/federation/nodes';
import { TaskStore } from '../../store/federation/tasks';
import type { BenchStack } from './stack';
import type { Fixtures } from './reads-fill';

export interface FixtureCounts {
  nodes: number;
  tasks: number;
  chatKeys: number;
  writers: number;
}

const PROPOSALS = 20;
/** Nodes stored per round (see the nodes step). */
const NODE_ROUND = 200;
const ORDERS_FOR_READ_NODE = 20;
const BRANDS = BRAND_CODES.slice(0, 5);

/** `count` calls of `op` from `concurrency` loops. */
async function pool(concurrency: number, count: number, op: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, count) }, async () => {
      while (next < count) await op(next++);
    })
  );
}

async function call(
  stack: BenchStack,
  method: 'GET' | 'POST',
  url: string,
  headers: Record<string, string>,
  body?: unknown
): Promise<Record<string, unknown>> {
  const send = () =>
    fetch(url, {
      method,
      headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body)
    });
  let res = await send();
  // As a client does: a 503 or 429 says when to come back (a database busy with the fill's other work).
  for (let retry = 0; (res.status === 503 || res.status === 429) && retry < 10; retry++) {
    await res.arrayBuffer();
    await new Promise((r) => setTimeout(r, 1000 * Math.max(1, Number(res.headers.get('retry-after')) || 1)));
    res = await send();
  }
  const text = await res.text();
  if (res.status >= 300) {
    stack.alive();
    throw new Error(`${method} ${new URL(url).pathname}: ${res.status} ${text}`);
  }
  return JSON.parse(text) as Record<string, unknown>;
}

/** Times a step and prints what it made. */
async function step(what: string, make: () => Promise<string | null>): Promise<void> {
  const t0 = Date.now();
  const made = await make();
  if (made) console.log(`  ${what}: ${made} in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}

/** Makes (or tops up) every fixture; `known` is what a kept data dir's file says. */
export async function ensureFixtures(
  stack: BenchStack,
  db: Db,
  known: Partial<Fixtures>,
  want: FixtureCounts,
  save: (f: Partial<Fixtures>) => void
): Promise<Fixtures> {
  const admin = { authorization: `Bearer ${stack.adminToken}` };
  const credentials = new CredentialStore(db);
  const f: Partial<Fixtures> = { ...known };
  console.log('fixtures (what the reads touch besides the ledger):');

  await step('credentials', async () => {
    f.readerDid = 'did:bench:reader';
    f.writerDids = Array.from({ length: Math.max(1, want.writers) }, (_, i) => `did:bench:writer${i}`);
    // Registered again on a kept data dir too: 200 when it is there already.
    for (const did of [f.readerDid, ...f.writerDids])
      await call(stack, 'POST', `${stack.base}/admin/dids`, admin, { did });
    if (!f.homologousToken) {
      const issued = await call(stack, 'POST', `${stack.base}/admin/homologous-tokens`, admin, {
        label: 'bench-reads'
      });
      f.homologousToken = issued.token as string;
      f.homologousId = issued.token_id as string;
    }
    f.nodeKey ??= newSecret('nk_');
    if (!f.chatKey) f.chatKey = (await credentials.issueApiKey('bench-reads reader', 'S1')).apiKey;
    save(f);
    return `${f.writerDids.length + 1} DIDs, a homologous token, a chat key`;
  });

  const nodes = new NodeStore(db);
  const newOnline: string[] = [];
  await step('nodes', async () => {
    const have = await nodes.nodes.countDocuments({});
    if (have >= want.nodes) return null;
    const now = new Date().toISOString();
    const review = { decision: 'approved' as const, reviewer: 'bench-reads', reason: 'bench fill', at: now };
    const build = (seq: number): NodeDocument => {
      const state: NodeState = seq % 10 === 0 ? 'pending_review' : seq % 10 === 1 ? 'offline' : 'online';
      const brand = BRANDS[seq % BRANDS.length]!;
      return {
        _id: formatNodeId(brand, seq),
        seq,
        name: `bench node ${seq}`,
        brand: { code: brand, model_base: `model-${seq % 7}` },
        instance: { os: 'linux', cpu: `${4 + (seq % 4) * 4} cores`, memory_gb: 16 + (seq % 8) * 16, gpu: null },
        capabilities: ['chat', ...(seq % 3 === 0 ? ['embed'] : []), ...(seq % 10 === 5 ? ['gpu'] : [])],
        api_key_hash: hashSecret(f.nodeKey!),
        state,
        created_at: now,
        state_changed_at: now,
        review: state === 'pending_review' ? null : review
      };
    };
    // In rounds of NODE_ROUND, one after another: the store claims each round at once (one insert of its nodes,
    // one of their change records), as concurrent registrations are. Bigger rounds overwhelm the change log here: a
    // change-record insert slower than 2.5 s is inserted again, re-stamped, up to 5 times (store/federation/
    // node-change-log.ts), and every node cache and presence sweeper reads those collections whole each second. All
    // 10,000 in one round, on this 2-core host busy with other work, left the database in a storm of such reads
    // (and of the sweepers' retried attempts, each reading every node) that no heartbeat got through.
    for (let made = have; made < want.nodes; made += NODE_ROUND) {
      const docs = await Promise.all(
        Array.from({ length: Math.min(NODE_ROUND, want.nodes - made) }, () => nodes.insertWithNextSequence(build))
      );
      newOnline.push(...docs.filter((d) => d.state === 'online').map((d) => d._id));
    }
    return `${want.nodes - have} stored (${have} there already)`;
  });

  await step('heartbeats', async () => {
    if (newOnline.length === 0) return null;
    const headers = { 'x-external-key': f.nodeKey! };
    await pool(8, newOnline.length, (i) =>
      call(
        stack,
        'POST',
        `${stack.base}/a2a/heartbeat`,
        { ...headers, 'x-external-node': newOnline[i]! },
        {
          resources: { cpu_percent: 10 + (i % 80), gpu_count: i % 10 === 5 ? 2 : 0, memory_used_gb: 4 + (i % 12) },
          performance: { latency_ms: 20 + (i % 200), tasks_done: i % 50 }
        }
      )
    );
    return `one from each of the ${newOnline.length} new online nodes`;
  });

  const online = (
    await nodes.nodes
      .find({ state: 'online' }, { projection: { _id: 1 } })
      .sort({ seq: 1 })
      .toArray()
  ).map((d) => d._id);
  if (online.length === 0) throw new Error('no online node: BENCH_NODES must be 3 or more');
  f.instructionsNode ??= online[0]!;

  await step('GPU records', async () => {
    const gpus = new GpuStore(db);
    const owners = online.filter((_, i) => i % 10 === 0);
    const have = await db.collection('gpu_registry').countDocuments({});
    if (have >= owners.length) return null;
    const models = ['NVIDIA H100 80GB', 'NVIDIA A100 40GB', 'NVIDIA L4', 'AMD MI300X'];
    await pool(16, owners.length, (i) =>
      gpus.upsert({
        node_id: owners[i]!,
        name: 'default',
        model: models[i % models.length]!,
        memory_gb: [80, 40, 24, 192][i % models.length]!,
        count: 1 + (i % 8),
        price: { amount: 1 + (i % 5), currency: 'USD', unit: 'gpu_hour' },
        endpoint: `https://gpu-${i}.bench.example/v1`
      })
    );
    return `${owners.length} (${have} there already)`;
  });

  await step('work orders', async () => {
    const orders = new WorkOrderStore(db);
    const others = online.filter((_, i) => i > 0 && i % 10 === 0);
    const wanted = ORDERS_FOR_READ_NODE + others.length;
    const have = await db.collection('instructions').countDocuments({});
    if (have >= wanted) return null;
    const targets = [...Array.from({ length: ORDERS_FOR_READ_NODE }, () => f.instructionsNode!), ...others];
    await pool(16, targets.length, (i) =>
      orders.insert({
        _id: `wo_bench_${i}`,
        node_id: targets[i]!,
        key: `deploy.order.${i}`,
        value_json: JSON.stringify({ action: 'deploy', service: `svc${i % 40}`, version: `1.${i}.0` }),
        approval_id: `ap_bench_${i}`,
        pushed_by: 'did:bench:reader'
      })
    );
    return `${targets.length}`;
  });

  await step('tasks', async () => {
    const tasks = db.collection('tasks');
    const have = await tasks.countDocuments({});
    if (have >= want.tasks) return null;
    const a2a = createA2aTasks({
      tasks: new TaskStore(db),
      config: { A2A_SEND_WAIT_S: 30, A2A_STREAM_MAX_S: 900, TASK_LEASE_S: 300 }
    });
    const types = ['a2a.message', 'summarize', 'embed', 'translate'];
    let logged = Date.now();
    const t0 = Date.now();
    await pool(64, want.tasks - have, async (k) => {
      const i = have + k;
      const submitter = i % 2 === 0 ? f.homologousId! : online[i % online.length]!;
      // An A2A Message as a client sends it (the binding's schema admits text parts; queue reads what it needs).
      const message = {
        messageId: `bench-${i}`,
        role: 'ROLE_USER',
        contextId: `ctx-${i % 1000}`,
        parts: [{ text: `bench task ${i}: summarise the node metrics of hour ${i % 24}`, mediaType: 'text/plain' }],
        metadata: { task_type: types[i % types.length], priority: i % 10, required_capabilities: ['chat'] }
      };
      const out = await a2a.queue(submitter, message);
      if (!out.ok) throw new Error(`task ${i} could not be queued: ${out.reason}`);
      if (Date.now() - logged > 30_000) {
        logged = Date.now();
        console.log(`    tasks: ${k}/${want.tasks - have} in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
      }
    });
    return `${want.tasks - have} queued (${have} there already)`;
  });
  const mine = await db
    .collection<{ _id: string }>('tasks')
    .findOne({ submitted_by: f.homologousId }, { projection: { _id: 1 } });
  if (!mine) throw new Error('no task of the bench caller: BENCH_TASKS must be 2 or more');
  f.taskId = mine._id;

  await step('chat keys', async () => {
    const have = await db.collection('api_keys').countDocuments({});
    const usage = new ChatUsageStore(db);
    const today = Date.now();
    const record = (keyId: string, n: number) => {
      const at = new Date(today - (n % 7) * 86_400_000);
      const prompt = 20 + (n % 300);
      return usage.record({
        _id: `u_${randomBytes(8).toString('hex')}`,
        key_id: keyId,
        day: at.toISOString().slice(0, 10),
        at,
        model: 'gpt-4o-mini',
        provider: 'openai',
        endpoint: '/v1/chat/completions',
        stream: n % 3 === 0,
        prompt_tokens: prompt,
        completion_tokens: 2 * prompt,
        total_tokens: 3 * prompt,
        cost: 3 * prompt * 1e-6,
        estimated: false,
        error: null,
        error_count: 0,
        estimated_count: 0
      });
    };
    const readerKeyId = /^zk_([a-f0-9]{16})_/.exec(f.chatKey!)![1]!;
    const readerRecords = await db.collection('chat_usage').countDocuments({ key_id: readerKeyId });
    if (have >= want.chatKeys && readerRecords > 0) return null;
    // The reader's key: 100 requests over the last 7 days; every other key 5.
    await pool(16, Math.max(0, 100 - readerRecords), (n) => record(readerKeyId, n));
    await pool(16, Math.max(0, want.chatKeys - have), async (i) => {
      const { doc } = await credentials.issueApiKey(`bench-reads ${have + i}`, ['S1', 'S2', 'S3'][i % 3]!);
      for (let n = 0; n < 5; n++) await record(doc._id, i + n);
    });
    await usage.close();
    return `${Math.max(0, want.chatKeys - have)} issued with usage records (${have} there already)`;
  });

  await step('directory-tree proposals', async () => {
    const open = await db.collection('tree_proposals').countDocuments({ state: 'open' });
    if (open >= PROPOSALS) return null;
    const latest = await call(stack, 'GET', `${stack.base}/a2a/directory-tree/latest`, {});
    for (let i = open; i < PROPOSALS; i++)
      await call(
        stack,
        'POST',
        `${stack.base}/a2a/directory-tree/propose`,
        { 'x-zr-token': f.homologousToken! },
        {
          base_version: latest.version,
          title: `bench proposal ${i}`,
          rationale: 'measured by bench:reads',
          patch: [{ op: 'add', path: `/bench-${i}`, value: { owner: `team-${i % 5}`, paths: [`/srv/${i}`] } }]
        }
      );
    return `${PROPOSALS - open} opened`;
  });

  save(f);
  return f as Fixtures;
}

/**
 * An hour of heartbeat history for the node whose page is read (`/a2a/nodes/<node_id>`): one sample in each of the
 * last HEARTBEAT_HISTORY_SIZE (60) intervals of HEARTBEAT_HISTORY_INTERVAL_S (60 s), as a node beating for an hour
 * leaves, written through the store the presence recorder writes with. Called before each size's reads (an hour of
 * filling ages the earlier ones out of the window); a sample already in an interval is kept.
 */
export async function nodeHistoryHour(db: Db, nodeId: string, now = Date.now()): Promise<void> {
  const history = new HeartbeatHistoryStore(db, { intervalMs: 60_000, size: 60 });
  await history.append(
    Array.from({ length: 60 }, (_, i) => {
      const seenAt = now - i * 60_000;
      return {
        node_id: nodeId,
        seen_at: seenAt,
        sample: {
          at: new Date(seenAt).toISOString(),
          resources: { cpu_percent: 10 + (i % 80), memory_used_gb: 4 + (i % 12) },
          performance: { latency_ms: 20 + i }
        }
      };
    })
  );
}
