/**
 * API_PROCESSES=2 under the launcher: two API processes (Node's cluster module) serve the same ports; heartbeats
 * spread over new connections reach both, each recording presence under its own instance (two documents in the
 * node's shard), and the node is online for both; one killed with SIGKILL is restarted by the API's primary (with
 * the reason in the log) while the other keeps serving. Truth writes through both processes are appended by the
 * primary (the host's one ledger writer): all answered, seqs distinct, the ledger verifies; their quota slots are
 * taken by the primary's one lease (slots 1…40, no holes).
 */
import http from 'node:http';
import fs from 'node:fs';
import { MongoClient } from 'mongodb';
import { registerNode, RegisteredNode } from '../support/federation';
import { eventually } from '../support/service';
import { presenceShardOf } from '../../store/federation/presence';
import { alive, killLeftovers, launch, recordedPids } from './launcher';

const seen = new Set<number>();
afterEach(() => killLeftovers(seen));

/** A request on a connection of its own (the cluster's primary hands each new connection to the next process). */
function freshRequest(method: string, url: string, headers: Record<string, string>, body?: unknown): Promise<number> {
  return freshExchange(method, url, headers, body).then((r) => r.status);
}

function freshExchange(
  method: string,
  url: string,
  headers: Record<string, string>,
  body?: unknown
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        method,
        agent: false,
        headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) }
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      }
    );
    req.on('error', reject);
    req.setTimeout(10_000, () => req.destroy(new Error(`no answer to ${method} ${url} within 10 s`)));
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

/** The API processes the primary runs: its children running api/server.ts (not, e.g., tsx's esbuild service). */
function apiProcesses(primary: number): number[] {
  return fs
    .readdirSync('/proc')
    .filter((e) => /^\d+$/.test(e))
    .filter((e) => {
      try {
        return (
          Number(
            fs
              .readFileSync(`/proc/${e}/stat`, 'utf8')
              .replace(/^.*\) /, '')
              .split(' ')[1]
          ) === primary && fs.readFileSync(`/proc/${e}/cmdline`, 'utf8').includes('api/server.ts')
        );
      } catch {
        return false;
      }
    })
    .map(Number)
    .filter(alive);
}

const beat = (base: string, node: RegisteredNode) =>
  freshRequest(
    'POST',
    `${base}/a2a/heartbeat`,
    { 'x-external-node': node.node_id, 'x-external-key': node.api_key },
    {}
  );

it('runs two API processes on the same ports; both record presence; a killed one is restarted', async () => {
  const stack = await launch('node', { API_PROCESSES: '2', NODE_REVIEW_REQUIRED: 'false', NODE_OFFLINE_AFTER_S: '20' });
  await stack.ready;
  const pids = recordedPids(stack.dataDir);
  Object.values(pids).forEach((p) => seen.add(p));
  const workers = await eventually(
    async () => {
      const found = apiProcesses(pids.api!);
      return found.length === 2 ? found : undefined;
    },
    30_000,
    'two API processes'
  );
  workers.forEach((p) => seen.add(p));

  const node = await registerNode(stack.base, 'two-processes');
  const mongo = await MongoClient.connect(`mongodb://127.0.0.1:${stack.env.FERRETDB_PORT}/`);
  try {
    const db = mongo.db(stack.env.MONGODB_DB ?? 'zhongshu_hub');
    const shard = db.collection(`node_presence_${String(presenceShardOf(node.node_id)).padStart(2, '0')}`);
    const recordedBy = async () =>
      (await shard.find({}).toArray()).filter(
        (d) => node.node_id in (JSON.parse(String(d.seen_json)) as Record<string, number>)
      ).length;
    // New connections alternate between the processes; each heartbeat is recorded by the one that took it.
    await eventually(
      async () => {
        expect(await beat(stack.base, node)).toBe(200);
        return (await recordedBy()) >= 2 ? true : undefined;
      },
      30_000,
      'presence recorded by both API processes'
    );
    await eventually(
      async () => {
        const res = await fetch(`${stack.base}/a2a/nodes/${node.node_id}`);
        return ((await res.json()) as { node?: { state?: string } }).node?.state === 'online' ? true : undefined;
      },
      30_000,
      'the node online'
    );

    // Truth writes on new connections, so through both processes: the primary appends them all.
    const did = 'did:example:two-processes';
    expect(
      (
        await freshExchange(
          'POST',
          `${stack.base}/admin/dids`,
          { authorization: `Bearer ${stack.adminToken}` },
          { did }
        )
      ).status
    ).toBe(201);
    const writes = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        freshExchange(
          'POST',
          `${stack.base}/api/report/truth`,
          { 'x-did': did },
          { key: `two.processes.${i}`, value: { i } }
        )
      )
    );
    expect(writes.map((w) => w.status)).toEqual(writes.map(() => 200));
    const seqs = writes.map((w) => (JSON.parse(w.text) as { seq: number }).seq);
    expect(new Set(seqs).size).toBe(40);
    const verify = JSON.parse((await freshExchange('GET', `${stack.base}/api/verify`, {})).text) as {
      consistent: boolean;
    };
    expect(verify.consistent).toBe(true);
    // Their quota slots too were taken by the primary, from one lease for the host: once its unused slots are given
    // back (the DID idle for 2 s), the slots spent are exactly 1…40. (Processes leasing apart left holes where
    // each gave back the rest of its own block.)
    const slots = await eventually(
      async () => {
        const docs = await db
          .collection('quota_uses')
          .find({ scope: `truth:${did}` }, { projection: { _id: 0, n: 1 } })
          .toArray();
        return docs.length === 40 ? docs.map((d) => Number(d.n)).sort((a, b) => a - b) : undefined;
      },
      30_000,
      'the unused leased quota slots given back'
    );
    expect(slots).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));

    // One process killed: once the primary has seen it die (a connection handed to it before that is lost, as with
    // any crash), the other answers every request, and the primary restarts the dead one.
    process.kill(workers[0]!, 'SIGKILL');
    await eventually(
      async () =>
        /API process \d+ died \(killed by SIGKILL\); restarting it in [\d.]+ s/.test(stack.output()) ? true : undefined,
      30_000,
      'the restart in the log'
    );
    for (let i = 0; i < 10; i++) expect(await beat(stack.base, node)).toBe(200);
    const after = await eventually(
      async () => {
        const found = apiProcesses(pids.api!);
        return found.length === 2 && !found.includes(workers[0]!) ? found : undefined;
      },
      60_000,
      'the killed API process to be replaced'
    );
    after.forEach((p) => seen.add(p));
    // The replacement serves too: kill the survivor, and requests are answered by the new one.
    process.kill(workers[1]!, 'SIGKILL');
    await eventually(
      async () => ((await beat(stack.base, node).catch(() => 0)) === 200 ? true : undefined),
      30_000,
      'heartbeats answered by the replacement'
    );
    expect(recordedPids(stack.dataDir).api).toBe(pids.api);
  } finally {
    await mongo.close();
  }
  stack.child.kill('SIGINT');
  const [code] = await stack.exited;
  expect(code).toBe(0);
}, 300_000);
