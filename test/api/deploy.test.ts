/**
 * Deployment arbitration over real HTTP with a real nginx: this suite starts its own nginx (Debian's package) on a
 * free port under its own scratch data dir, and the service (API + worker) with the same DATA_DIR and
 * DEPLOY_WEB_PORT, so deploys are read back through nginx. Never touches a system nginx.
 */
import fs from 'node:fs';
import nodeHttp from 'node:http';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { findNginx, startNginx } from '../../scripts/stack/nginx';
import { deployLayout } from '../../core/deploy/web';
import { eventually, http, startTestService, TestService } from '../support/service';
import { issueHomologousToken, registerDid } from '../support/credentials';

/** Registers a DID (POST /admin/dids) and gives it registry fields through did_register with the admin token. */
async function registerWithChannels(
  mainUrl: string,
  adminToken: string,
  did: string,
  fields: { autonomy_level: number; channels: string[] }
): Promise<void> {
  await registerDid(mainUrl, adminToken, did);
  const res = await http('POST', `${mainUrl}/dal/deploy`, {
    body: { action: 'did_register', did, node_id: `node-${did.split(':').at(-1)}`, ...fields },
    headers: { 'X-DID': did, authorization: `Bearer ${adminToken}` }
  });
  if (res.status !== 200) throw new Error(`did_register ${did}: ${res.status} ${res.text}`);
}

/** The pid of this suite's worker process: the one running worker/main.ts for our own task queue. */
function workerPidOf(taskQueue: string): number {
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (!fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes('worker/main.ts')) continue;
      if (fs.readFileSync(`/proc/${entry}/environ`, 'utf8').split('\0').includes(`TEMPORAL_TASK_QUEUE=${taskQueue}`))
        return Number(entry);
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  throw new Error(`no worker process for ${taskQueue}`);
}

const nginxBin = findNginx(process.env.NGINX_BIN ?? '/usr/sbin/nginx');
const describeWithNginx = nginxBin ? describe : describe.skip;

describeWithNginx('deployment arbitration (real nginx)', () => {
  jest.setTimeout(180_000);
  let svc: TestService;
  let nginx: Awaited<ReturnType<typeof startNginx>> | null = null;
  let dataDir: string;
  let webPort: number;
  const did = 'did:example:deployer-1';
  const headers = { 'X-DID': did };
  const dal = () => `${svc.urls.main}/dal/deploy`;
  // What nginx serves, on a fresh connection each time: after a reload, an old worker finishing its keep-alive
  // connections still answers with the previous config for a moment (a deploy or config change is confirmed live on
  // fresh connections, as the hub checks it).
  const served = (p: string) =>
    new Promise<{ status: number; text: string; headers: nodeHttp.IncomingHttpHeaders }>((resolve, reject) => {
      nodeHttp
        .get({ host: '127.0.0.1', port: webPort, path: p, agent: false }, (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (d: string) => (text += d));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text, headers: res.headers }));
          res.on('error', reject);
        })
        .on('error', reject);
    });

  beforeAll(async () => {
    dataDir = path.join(process.env.ZH_TEST_DATA_DIR!, `deploy-${randomBytes(4).toString('hex')}`);
    fs.mkdirSync(dataDir, { recursive: true });
    nginx = await startNginx({ dataDir, binary: nginxBin!, host: '127.0.0.1', echo: false });
    webPort = nginx.port;
    svc = await startTestService({
      DATA_DIR: dataDir,
      DEPLOY_WEB_PORT: String(webPort),
      NGINX_BIN: nginxBin!,
      DEPLOY_KEEP_RELEASES: '3'
    });
    await registerWithChannels(svc.urls.main, svc.adminToken, did, { autonomy_level: 1, channels: ['deploy'] });
  });
  afterAll(async () => {
    await svc?.close();
    await nginx?.stop();
  });

  test('GET /dal/health: ok, service, version V2.0, port, 锚定, and the web server up', async () => {
    const res = await http('GET', `${svc.urls.main}/dal/health`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ ok: true, version: 'V2.0', port: webPort, web: 'up' });
    expect(typeof res.body['锚定']).toBe('string');
    expect(typeof res.body.service).toBe('string');
  });

  test('deploy needs a registered X-DID and JSON; an unknown action is 400 listing the actions', async () => {
    expect((await http('POST', dal(), { body: { action: 'deploy', target: 'site', content: 'x' } })).status).toBe(401);
    expect(
      (
        await http('POST', dal(), {
          body: { action: 'deploy', target: 'site', content: 'x' },
          headers: { 'X-DID': 'did:example:nobody' }
        })
      ).status
    ).toBe(401);
    expect(
      (await http('POST', dal(), { raw: 'action=deploy', headers: { ...headers, 'content-type': 'text/plain' } }))
        .status
    ).toBe(415);
    const unknown = await http('POST', dal(), { body: { action: 'launch', target: 'site' }, headers });
    expect(unknown.status).toBe(400);
    expect(JSON.stringify(unknown.body)).toContain('deploy, rollback');
    const escape = await http('POST', dal(), {
      body: { action: 'deploy', target: 'site', files: { '../../etc/x': 'no' } },
      headers
    });
    expect(escape.status).toBe(400);
    const badTarget = await http('POST', dal(), { body: { action: 'deploy', target: '../x', content: 'no' }, headers });
    expect(badTarget.status).toBe(400);
  });

  test('two versions are each served by nginx; rollback serves the previous one; the ledger records each outcome', async () => {
    const v1 = await http('POST', dal(), {
      body: { action: 'deploy', target: 'site', content: '<h1>version one</h1>', files: { 'css/app.css': 'body{}' } },
      headers
    });
    expect(v1.status).toBe(200);
    expect(v1.body).toMatchObject({
      ok: true,
      outcome: 'deployed',
      target: 'site',
      previous_release: null,
      workflow_id: 'deploy/site',
      failed_step: null
    });
    expect((await served('/site/')).text).toBe('<h1>version one</h1>');
    expect((await served('/site/css/app.css')).text).toBe('body{}');

    const v2 = await http('POST', dal(), {
      body: { action: 'deploy', target: 'site', content: '<h1>version two</h1>' },
      headers
    });
    expect(v2.status).toBe(200);
    expect(v2.body.previous_release).toBe(v1.body.release_id);
    expect((await served('/site/')).text).toBe('<h1>version two</h1>');
    expect((await served('/site/css/app.css')).status).toBe(404);

    const back = await http('POST', dal(), { body: { action: 'rollback', target: 'site' }, headers });
    expect(back.status).toBe(200);
    expect(back.body).toMatchObject({
      ok: true,
      action: 'rollback',
      outcome: 'deployed',
      release_id: v1.body.release_id,
      previous_release: v2.body.release_id
    });
    expect((await served('/site/')).text).toBe('<h1>version one</h1>');
    // current is a symlink into releases/ (switched by rename, never edited in place)
    expect(fs.readlinkSync(deployLayout(dataDir).current('site'))).toBe(`releases/${v1.body.release_id}`);

    const ledger = await http('GET', `${svc.urls.main}/api/truth?key=hub.deploy.&limit=50`);
    expect(ledger.status).toBe(200);
    const keys = ledger.body.results.map((r: { key: string }) => r.key);
    expect(keys.filter((k: string) => k === 'hub.deploy.deployed')).toHaveLength(2);
    expect(keys).toContain('hub.deploy.rolled_back');

    // No release older than v1: 409
    const none = await http('POST', dal(), { body: { action: 'rollback', target: 'site' }, headers });
    expect(none.status).toBe(409);
    expect(none.body.ok).toBe(false);
  });

  test('a deploy whose health check fails (nginx stopped) is compensated: previous release current, new one marked bad', async () => {
    const good = await http('POST', dal(), { body: { action: 'deploy', target: 'app', content: 'good' }, headers });
    expect(good.status).toBe(200);
    await nginx!.stop();
    await nginx!.closed;
    const bad = await http('POST', dal(), {
      body: { action: 'deploy', target: 'app', content: 'never served' },
      headers
    });
    expect(bad.status).toBe(502);
    expect(bad.body).toMatchObject({
      ok: false,
      error: 'deploy_failed',
      outcome: 'compensated',
      previous_release: good.body.release_id,
      current_release: good.body.release_id
    });
    expect(['reload', 'health_check']).toContain(bad.body.failed_step);
    expect(typeof bad.body.reason).toBe('string');
    expect(typeof bad.body.trace_id).toBe('string');
    expect(fs.readlinkSync(deployLayout(dataDir).current('app'))).toBe(`releases/${good.body.release_id}`);
    expect(fs.existsSync(path.join(deployLayout(dataDir).bad('app'), bad.body.release_id))).toBe(true);

    nginx = await startNginx({ dataDir, binary: nginxBin!, host: '127.0.0.1', port: webPort, echo: false });
    expect((await served('/app/')).text).toBe('good');
    const ledger = await http('GET', `${svc.urls.main}/api/truth?key=hub.deploy.compensated&limit=10`);
    expect(ledger.body.results[0].value).toMatchObject({
      target: 'app',
      failed_step: bad.body.failed_step,
      current_release: good.body.release_id
    });
  });

  test('config: a fragment is merged under nginx -t and reloaded; a failing one is restored (nginx keeps serving); confinement is 400', async () => {
    const cfg = (fragment: string, target = 'cfg') =>
      http('POST', dal(), { body: { action: 'config', target, fragment }, headers });
    expect(
      (await http('POST', dal(), { body: { action: 'deploy', target: 'cfg', content: 'cfg home' }, headers })).status
    ).toBe(200);
    const good = await cfg(
      'location = /cfg/hello {\n  default_type text/plain;\n  return 200 "hello from a fragment";\n}\nlocation ^~ /cfg/static/ { alias @current/; add_header X-Frag yes; }\n'
    );
    expect(good.status).toBe(200);
    expect(good.body).toMatchObject({
      ok: true,
      action: 'config',
      outcome: 'configured',
      target: 'cfg',
      workflow_id: 'deploy-config',
      removed: false
    });
    expect((await served('/cfg/hello')).text).toBe('hello from a fragment');
    const aliased = await served('/cfg/static/index.html');
    expect(aliased.headers['x-frag']).toBe('yes');
    expect(aliased.text).toBe('cfg home');
    const stored = fs.readFileSync(deployLayout(dataDir).fragmentSource('cfg'), 'utf8');

    // Passes the confinement rules, fails nginx -t: 400 with nginx's text; the previous files are back, nginx serves on.
    const broken = await cfg('location = /cfg/hello { retrun 200 "typo"; }');
    expect(broken.status).toBe(400);
    expect(broken.body).toMatchObject({ ok: false, error: 'invalid_request', outcome: 'rejected', restored: true });
    expect(broken.body.nginx_error).toContain('unknown directive "retrun"');
    expect(broken.body.nginx_error).not.toContain(dataDir);
    expect(fs.readFileSync(deployLayout(dataDir).fragmentSource('cfg'), 'utf8')).toBe(stored);
    expect((await served('/cfg/hello')).text).toBe('hello from a fragment');
    expect((await served('/cfg/')).text).toBe('cfg home');

    // Confinement: refused before nginx sees it.
    for (const fragment of [
      'location /cfg/ { include /etc/nginx/mime.types; }',
      'load_module /tmp/evil.so;',
      'location /other/ { return 200 "not mine"; }',
      'location ~ ^/cfg/|^/other/ { return 200; }',
      'server { listen 9999; server_name evil.example; }',
      'server { server_name _; return 200; }',
      'location /cfg/x/ { root /etc; }',
      'location /cfg/x/ { alias @current/../../other/current/; }',
      'location /cfg/x/ { access_log /tmp/x.log; }',
      'location /cfg/x/ { proxy_pass http://127.0.0.1:22; }',
      'location /cfg/x/ { fastcgi_pass 127.0.0.1:9000; }',
      'http { }'
    ]) {
      const res = await cfg(fragment);
      expect([fragment, res.status]).toEqual([fragment, 400]);
      expect(res.body.error).toBe('invalid_request');
    }
    expect((await served('/cfg/hello')).text).toBe('hello from a fragment');

    // A server block of its own (the hub adds its listen), then removal with an empty fragment.
    const vhost = await cfg(
      'server {\n  server_name cfg.example;\n  location / { default_type text/plain; return 200 "vhost cfg"; }\n}\n'
    );
    expect(vhost.status).toBe(200);
    const byHost = await new Promise<string>((resolve, reject) => {
      nodeHttp
        .get({ host: '127.0.0.1', port: webPort, path: '/', headers: { Host: 'cfg.example' } }, (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c.toString()));
          res.on('end', () => resolve(text));
        })
        .on('error', reject);
    });
    expect(byHost).toBe('vhost cfg');
    expect((await served('/cfg/hello')).status).toBe(404);
    const removed = await cfg('');
    expect(removed.body).toMatchObject({ ok: true, removed: true });
    expect(fs.existsSync(deployLayout(dataDir).fragmentSource('cfg'))).toBe(false);
    expect((await served('/cfg/')).text).toBe('cfg home');

    const ledger = await http('GET', `${svc.urls.main}/api/truth?key=hub.deploy.config_&limit=50`);
    const keys = ledger.body.results.map((r: { key: string }) => r.key);
    expect(keys).toContain('hub.deploy.config_configured');
    expect(keys).toContain('hub.deploy.config_rejected');
  });

  test('two concurrent deploys of one target are serialised: the second is 409 with Retry-After while the first runs', async () => {
    // No worker: the first run cannot finish, so the second request surely meets it (no timing involved).
    await svc.stopWorker();
    const first = http('POST', dal(), { body: { action: 'deploy', target: 'race', content: 'first' }, headers });
    const handle = svc.temporal.workflow.getHandle('deploy/race');
    await eventually(
      async () => ((await handle.describe().catch(() => null))?.status.name === 'RUNNING' ? true : undefined),
      30_000,
      'deploy/race running'
    );
    const second = await http('POST', dal(), {
      body: { action: 'deploy', target: 'race', content: 'second' },
      headers
    });
    expect(second.status).toBe(409);
    expect(second.body).toMatchObject({ ok: false, error: 'conflict', workflow_id: 'deploy/race' });
    expect(second.headers.get('retry-after')).toBeTruthy();
    await svc.startWorker();
    const done = await first;
    expect(done.status).toBe(200);
    expect((await served('/race/')).text).toBe('first');
    // Once the first has finished, the next deploy of the target runs.
    expect(
      (await http('POST', dal(), { body: { action: 'deploy', target: 'race', content: 'second' }, headers })).status
    ).toBe(200);
    expect((await served('/race/')).text).toBe('second');
  });

  test('a worker killed (SIGKILL) in the middle of a deploy: the run finishes on the next worker', async () => {
    expect(
      (await http('POST', dal(), { body: { action: 'deploy', target: 'crash', content: 'before' }, headers })).status
    ).toBe(200);
    // nginx paused: the health check's request hangs, so the run is surely inside that step when the worker dies.
    process.kill(-nginx!.child.pid!, 'SIGSTOP');
    const pending = http('POST', dal(), {
      body: { action: 'deploy', target: 'crash', content: 'after the crash' },
      headers
    });
    try {
      const handle = svc.temporal.workflow.getHandle('deploy/crash');
      await eventually(
        async () => {
          const d = await handle.describe().catch(() => null);
          const acts = (d?.raw.pendingActivities ?? []) as { activityType?: { name?: string | null } | null }[];
          return acts.some((a) => a.activityType?.name === 'checkServed') ? true : undefined;
        },
        60_000,
        'deploy/crash in its health check'
      );
      process.kill(-workerPidOf(svc.env.TEMPORAL_TASK_QUEUE!), 'SIGKILL');
    } finally {
      process.kill(-nginx!.child.pid!, 'SIGCONT');
    }
    await svc.stopWorker();
    await svc.startWorker();
    // The step the dead worker held times out (its start-to-close) and runs again on the new worker.
    const res = await pending;
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ ok: true, outcome: 'deployed', failed_step: null });
    expect((await served('/crash/')).text).toBe('after the crash');
    expect(fs.readlinkSync(deployLayout(dataDir).current('crash'))).toBe(`releases/${res.body.release_id}`);
  });

  test('keeps DEPLOY_KEEP_RELEASES releases', async () => {
    for (let i = 0; i < 5; i++) {
      const res = await http('POST', dal(), { body: { action: 'deploy', target: 'prune', content: `v${i}` }, headers });
      expect(res.status).toBe(200);
    }
    expect(fs.readdirSync(deployLayout(dataDir).releases('prune')).filter((n) => n.startsWith('r'))).toHaveLength(3);
    expect((await served('/prune/')).text).toBe('v4');
  });
});

describe('deployment arbitration without nginx', () => {
  jest.setTimeout(120_000);
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService({ NGINX_BIN: '/nonexistent/sbin/nginx' }, { worker: false });
    await registerWithChannels(svc.urls.main, svc.adminToken, 'did:example:deployer-2', {
      autonomy_level: 1,
      channels: ['deploy']
    });
  });
  afterAll(async () => {
    await svc?.close();
  });

  test('nginx missing: every other route works and deploy answers 503 naming what to install', async () => {
    const health = await http('GET', `${svc.urls.main}/dal/health`);
    expect(health.body).toMatchObject({ ok: true, web: 'not_installed' });
    const res = await http('POST', `${svc.urls.main}/dal/deploy`, {
      body: { action: 'deploy', target: 'site', content: 'x' },
      headers: { 'X-DID': 'did:example:deployer-2' }
    });
    expect(res.status).toBe(503);
    expect(res.body.message).toContain('apt-get install -y nginx');
    expect((await http('GET', `${svc.urls.main}/api/status`)).status).toBe(200);
  });

  test('port pool: 50 concurrent allocations get 50 distinct ports; idempotent per app; register, release, list', async () => {
    const headers = { 'X-DID': 'did:example:deployer-2' };
    const dal = `${svc.urls.main}/dal/deploy`;
    const apps = Array.from({ length: 50 }, (_, i) => `app-${i}`);
    const answers = await Promise.all(
      apps.map((app) => http('POST', dal, { body: { action: 'port_alloc', app }, headers }))
    );
    expect(answers.map((a) => a.status)).toEqual(apps.map(() => 200));
    const ports = answers.map((a) => a.body.port as number);
    expect(new Set(ports).size).toBe(50);
    for (const p of ports) expect(p >= 18000 && p <= 18999).toBe(true);
    const again = await http('POST', dal, { body: { action: 'port_alloc', app: 'app-7' }, headers });
    expect(again.body).toMatchObject({ port: ports[7], existing: true });

    const taken = await http('POST', dal, {
      body: { action: 'port_register', app: 'outsider', port: ports[3] },
      headers
    });
    expect(taken.status).toBe(409);
    const reg = await http('POST', dal, { body: { action: 'port_register', app: 'outsider', port: 20001 }, headers });
    expect(reg.body).toMatchObject({ ok: true, port: 20001, existing: false });

    const rel = await http('POST', dal, { body: { action: 'port_release', port: ports[3] }, headers });
    expect(rel.body).toMatchObject({ ok: true, app: 'app-3', port: ports[3] });
    expect((await http('POST', dal, { body: { action: 'port_release', app: 'app-3' }, headers })).status).toBe(404);
    expect(
      (await http('POST', dal, { body: { action: 'port_release', app: 'app-4', port: ports[4] }, headers })).status
    ).toBe(400);

    const list = await http('GET', `${svc.urls.main}/dal/ports?limit=1000`, { headers });
    expect(list.status).toBe(200);
    expect(list.body).toMatchObject({ total: 50, pool: { first: 18000, last: 18999 } });
    expect((await http('GET', `${svc.urls.main}/dal/ports`)).status).toBe(401);
  });

  test('the registry: deploy channel, arbitrator level, admin token; a revoked DID is refused at once by every API process', async () => {
    const dal = `${svc.urls.main}/dal/deploy`;
    const admin = { authorization: `Bearer ${svc.adminToken}` };
    // Registered by POST /admin/dids only: authenticated, but no channel and level 0.
    await registerDid(svc.urls.main, svc.adminToken, 'did:example:plain');
    const plain = { 'X-DID': 'did:example:plain' };
    const refused = await http('POST', dal, { body: { action: 'port_alloc', app: 'plain-app' }, headers: plain });
    expect(refused.status).toBe(403);
    expect(refused.body.message).toContain('deploy');
    expect((await http('GET', `${svc.urls.main}/dal/ports`, { headers: plain })).status).toBe(403);
    // The admin token beside X-DID allows it.
    expect(
      (await http('POST', dal, { body: { action: 'port_alloc', app: 'plain-app' }, headers: { ...plain, ...admin } }))
        .status
    ).toBe(200);
    // A wrong admin token is no admin token.
    expect(
      (
        await http('POST', dal, {
          body: { action: 'port_alloc', app: 'plain-app' },
          headers: { ...plain, authorization: 'Bearer wrong-token-wrong-token-wrong' }
        })
      ).status
    ).toBe(403);

    // Registry actions need an arbitrator: the deployer (level 1) is not one.
    const deployer = { 'X-DID': 'did:example:deployer-2' };
    const entry = {
      action: 'did_register',
      did: 'did:example:node-a',
      node_id: 'node-a',
      public_key: 'z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK',
      autonomy_level: 2,
      channels: ['deploy', 'truth']
    };
    expect((await http('POST', dal, { body: entry, headers: deployer })).status).toBe(403);
    await registerWithChannels(svc.urls.main, svc.adminToken, 'did:example:arbiter', {
      autonomy_level: 4,
      channels: []
    });
    const arbiter = { 'X-DID': 'did:example:arbiter' };
    const reg = await http('POST', dal, { body: entry, headers: arbiter });
    expect(reg.status).toBe(200);
    expect(reg.body).toMatchObject({
      ok: true,
      action: 'did_register',
      did: 'did:example:node-a',
      node_id: 'node-a',
      autonomy_level: 2,
      channels: ['deploy', 'truth'],
      created: true,
      revoked: false
    });
    // Above its own level: refused; the same record POST /admin/dids reads.
    expect(
      (await http('POST', dal, { body: { ...entry, did: 'did:example:node-b', autonomy_level: 5 }, headers: arbiter }))
        .status
    ).toBe(403);
    expect(
      (await http('POST', `${svc.urls.main}/admin/dids`, { body: { did: 'did:example:node-a' }, headers: admin })).body
    ).toMatchObject({ created: false });
    expect(
      (await http('POST', dal, { body: { ...entry, channels: ['deploy', 'deploy'] }, headers: arbiter })).status
    ).toBe(400);

    // node-a may deploy (port pool), on this API process and on a second one.
    const second = await svc.startSecondApi();
    try {
      const nodeA = { 'X-DID': 'did:example:node-a' };
      expect(
        (await http('POST', dal, { body: { action: 'port_alloc', app: 'node-a-app' }, headers: nodeA })).status
      ).toBe(200);
      expect((await http('GET', `${second.url}/dal/ports`, { headers: nodeA })).status).toBe(200);
      const rev = await http('POST', dal, {
        body: { action: 'did_revoke', did: 'did:example:node-a' },
        headers: arbiter
      });
      expect(rev.body).toMatchObject({ ok: true, action: 'did_revoke', revoked: true });
      // Refused at once, on every X-DID route, by both processes (the X-DID check reads the registry every time).
      expect(
        (await http('POST', dal, { body: { action: 'port_alloc', app: 'node-a-app' }, headers: nodeA })).status
      ).toBe(401);
      expect((await http('GET', `${second.url}/dal/ports`, { headers: nodeA })).status).toBe(401);
      expect(
        (
          await http('POST', `${second.url}/api/report/truth`, {
            body: { key: 'node.a.x', value: { a: 1 } },
            headers: nodeA
          })
        ).status
      ).toBe(401);
      // Revoked twice: 404; registered again: 409 (a revoked DID stays revoked).
      expect(
        (await http('POST', dal, { body: { action: 'did_revoke', did: 'did:example:node-a' }, headers: arbiter }))
          .status
      ).toBe(404);
      expect((await http('POST', dal, { body: entry, headers: arbiter })).status).toBe(409);
    } finally {
      await second.stop();
    }
    const ledger = await http('GET', `${svc.urls.main}/api/truth?key=hub.deploy.did_&limit=50`);
    const keys = ledger.body.results.map((r: { key: string }) => r.key);
    expect(keys).toContain('hub.deploy.did_registered');
    expect(keys).toContain('hub.deploy.did_revoked');
  });

  test('work orders: inbox_push is held for the high-risk approval and reaches the node queue only once approved; inbox_ack by that node', async () => {
    await svc.startWorker();
    const dal = `${svc.urls.main}/dal/deploy`;
    const deployer = { 'X-DID': 'did:example:deployer-2' };
    await registerWithChannels(svc.urls.main, svc.adminToken, 'did:example:w1', { autonomy_level: 1, channels: [] });
    const node = { 'X-DID': 'did:example:w1' };
    const queue = async (all = false) =>
      (
        await http('GET', `${svc.urls.main}/api/instructions/node-w1${all ? '?include_acked=true' : ''}`, {
          headers: node
        })
      ).body;
    const approver = { 'x-zr-token': await issueHomologousToken(svc.urls.main, svc.adminToken) };
    const order = {
      action: 'inbox_push',
      key: 'KERNEL.EVOLUTION.DIRECTIVE.restart',
      value: { directive_action: 'restart', target: 'site' },
      node_id: 'node-w1'
    };

    expect((await http('POST', dal, { body: { ...order, key: 'mysys.not.a.seed' }, headers: deployer })).status).toBe(
      400
    );
    expect((await http('POST', dal, { body: { ...order, value: { target: 'site' } }, headers: deployer })).status).toBe(
      400
    );
    expect((await http('POST', dal, { body: order, headers: node })).status).toBe(403); // no deploy channel

    const pushed = await http('POST', dal, { body: order, headers: deployer });
    expect(pushed.status).toBe(202);
    expect(pushed.body).toMatchObject({
      ok: true,
      pending: true,
      node_id: 'node-w1',
      workflow_id: `work-order/${pushed.body.instruction_id}`
    });
    // Held: nothing in the queue, nothing to acknowledge; the approval is listed like any held write.
    expect((await queue()).count).toBe(0);
    expect(
      (await http('POST', dal, { body: { action: 'inbox_ack', id: pushed.body.instruction_id }, headers: node })).status
    ).toBe(404);
    // The approval is the work order's child workflow: the answer waits briefly for it to exist, and on a loaded
    // machine it may appear a moment after the answer (docs/deploy.md#actions, inbox_push), never later than its
    // first task.
    const held = await eventually(
      async () => {
        const res = await http('GET', `${svc.urls.main}/api/truth/approvals/${pushed.body.approval_id}`, {
          headers: approver
        });
        return res.status === 404 ? undefined : res;
      },
      30000,
      'the approval to exist'
    );
    expect(held.status).toBe(200);
    expect(JSON.stringify(held.body)).toContain('KERNEL.EVOLUTION.DIRECTIVE.restart');

    const approved = await http('POST', `${svc.urls.main}/api/truth/approvals/${pushed.body.approval_id}/approve`, {
      headers: approver,
      body: { reason: 'planned restart' }
    });
    expect(approved.status).toBe(200);
    const outcome = await svc.temporal.workflow.getHandle(pushed.body.workflow_id).result();
    expect(outcome).toMatchObject({ state: 'approved', instruction_id: pushed.body.instruction_id });
    expect(typeof outcome.truth_seq).toBe('number');
    const queued = await queue();
    expect(queued.count).toBe(1);
    expect(queued.instructions[0]).toMatchObject({
      instruction_id: pushed.body.instruction_id,
      key: order.key,
      value: order.value,
      acked_at: null
    });

    // Only that node acknowledges it (or the admin token); once.
    expect(
      (await http('POST', dal, { body: { action: 'inbox_ack', id: pushed.body.instruction_id }, headers: deployer }))
        .status
    ).toBe(403);
    const ack = await http('POST', dal, {
      body: { action: 'inbox_ack', id: pushed.body.instruction_id },
      headers: node
    });
    expect(ack.status).toBe(200);
    expect(ack.body).toMatchObject({
      ok: true,
      instruction_id: pushed.body.instruction_id,
      node_id: 'node-w1',
      already_acked: false
    });
    expect(
      (await http('POST', dal, { body: { action: 'inbox_ack', id: pushed.body.instruction_id }, headers: node })).body
    ).toMatchObject({ already_acked: true, ledger_seq: null });
    expect((await queue()).count).toBe(0);
    expect((await queue(true)).count).toBe(1);

    // A rejected order never reaches the queue.
    const second = await http('POST', dal, {
      body: { ...order, value: { directive_action: 'wipe' } },
      headers: deployer
    });
    expect(second.status).toBe(202);
    expect(
      (
        await http('POST', `${svc.urls.main}/api/truth/approvals/${second.body.approval_id}/reject`, {
          headers: approver,
          body: { reason: 'no' }
        })
      ).status
    ).toBe(200);
    expect(await svc.temporal.workflow.getHandle(second.body.workflow_id).result()).toMatchObject({
      state: 'rejected',
      truth_seq: null
    });
    expect((await queue(true)).count).toBe(1);

    const ledger = await http('GET', `${svc.urls.main}/api/truth?key=hub.deploy.inbox_&limit=50`);
    const keys = ledger.body.results.map((r: { key: string }) => r.key);
    expect(keys).toEqual(
      expect.arrayContaining(['hub.deploy.inbox_pushed', 'hub.deploy.inbox_acked', 'hub.deploy.inbox_refused'])
    );
    const truth = await http('GET', `${svc.urls.main}/api/truth?key=KERNEL.EVOLUTION.DIRECTIVE.restart&limit=10`);
    expect(truth.body.results).toHaveLength(1);
  });
});
