/**
 * A control server for the Python SDK's tests (test double, test/ only): what a Python test cannot do through the
 * hub's API it asks here, over HTTP on 127.0.0.1. Kill or start the second API process the SDK talks to, list the
 * test DID's ledger keys, set the tampering proxy (hub-proxy.ts) and read when requests reached it, be a witness
 * cosigning the checkpoints the proxy serves (its key at GET /witness), cancel a task.
 */
import { generateKeyPairSync } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { cosign, cosignatureVerifierKey } from '../../../core/tlog/cosignature.node';
import { TaskStore } from '../../../store/federation/tasks';
import type { TestService } from '../../support/service';
import type { HubProxy } from '../typescript/hub-proxy';

export interface Control {
  url: string;
  api2Url(): string;
  close(): Promise<void>;
}

type Api2 = Awaited<ReturnType<TestService['startSecondApi']>>;

export async function startControl(deps: {
  svc: TestService;
  api2Port: string;
  proxy: HubProxy;
  did: string;
}): Promise<Control> {
  const { svc, api2Port, proxy, did } = deps;
  let api2: Api2 | null = await svc.startSecondApi({ PORT: api2Port });
  const witnessKeys = generateKeyPairSync('ed25519');
  const impostor = generateKeyPairSync('ed25519');
  const raw = Buffer.from(witnessKeys.publicKey.export({ format: 'jwk' }).x!, 'base64url');
  const witness = { name: 'witness.test/python-sdk', keys: witnessKeys, raw, vkey: '' };
  witness.vkey = cosignatureVerifierKey(witness.name, raw);
  const api2Url = api2.url;

  const routes: Record<string, (q: URLSearchParams, body: any) => Promise<unknown>> = {
    'POST /api2/kill': async () => {
      await api2?.kill();
      api2 = null;
      return { killed: true };
    },
    'POST /api2/start': async () => {
      if (!api2) api2 = await svc.startSecondApi({ PORT: api2Port });
      return { url: api2.url };
    },
    'GET /ledger': async (q) => {
      const prefix = q.get('prefix') ?? '';
      const entries = await svc.db.collection('ledger').find({ did }).project({ key: 1 }).toArray();
      return { keys: entries.map((e) => String(e.key)).filter((k) => k.startsWith(prefix)) };
    },
    'GET /witness': async () => ({ key: witness.vkey }),
    'POST /proxy': async (_q, body) => {
      proxy.tamperProof = Boolean(body.tamper_proof);
      proxy.tamperCheckpoint = Boolean(body.tamper_checkpoint);
      // The test's witness cosigns the checkpoints it serves: honestly, or with another key under its name and id.
      const signer = { honest: witness.keys.privateKey, forged: impostor.privateKey }[String(body.cosign)];
      proxy.cosign = signer
        ? (text) => cosign(text, Math.floor(Date.now() / 1000), witness.name, signer, witness.raw)
        : null;
      proxy.refuse.clear();
      for (const r of body.refuse ?? [])
        proxy.refuse.set(r.prefix, { status: r.status, retryAfterS: r.retry_after_s, times: r.times });
      if (body.clear_arrivals) proxy.arrivals.length = 0;
      return { ok: true };
    },
    'GET /proxy/arrivals': async (q) => {
      const prefix = q.get('prefix') ?? '/';
      return { at_ms: proxy.arrivals.filter((a) => a.path.startsWith(prefix)).map((a) => a.at) };
    },
    'POST /task/cancel': async (_q, body) => ({ canceled: (await new TaskStore(svc.db).cancel(body.task_id)).canceled })
  };

  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://control');
    const route = routes[`${req.method} ${url.pathname}`];
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (!route) {
        res.writeHead(404).end();
        return;
      }
      const text = Buffer.concat(chunks).toString('utf8');
      route(url.searchParams, text ? JSON.parse(text) : {})
        .then((answer) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer)))
        .catch((err: Error) => res.writeHead(500).end(err.message));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    api2Url: () => api2Url,
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  };
}
