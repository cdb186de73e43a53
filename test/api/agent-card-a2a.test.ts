/**
 * The agent card promises only what answers. An A2A client (@a2a-js/sdk) resolves the card from both paths, picks
 * the advertised interface and calls every operation of it: each answers (SendMessage with a message, the task
 * operations with the protocol's typed errors), none is a bare 404. Capabilities the hub does not serve are off, and
 * every URL the card names is served. When the CI venv exists (scripts/ci/python-venv.sh), the Python SDK (a2a-sdk)
 * checks the same card: every REQUIRED field present and its client working against the binding.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { http, startTestService, TestService } from '../support/service';

const ROOT = path.resolve(__dirname, '..', '..');

let svc: TestService;
/** What the JavaScript SDK saw (scripts/ci/check-agent-card.ts, a process of its own: see its header). */
let seen: Record<string, any>;

beforeAll(async () => {
  svc = await startTestService({}, { worker: false });
  const run = spawnSync(process.execPath, ['--import', pathToFileURL(require.resolve('tsx')).href, path.join(ROOT, 'scripts/ci/check-agent-card.ts'), svc.urls.main], {
    encoding: 'utf8',
    timeout: 60_000
  });
  if (run.status !== 0) throw new Error(`check-agent-card.ts failed: ${run.stderr}`);
  seen = JSON.parse(run.stdout);
}, 180_000);

afterAll(async () => {
  await svc?.close();
});

test('both card paths resolve, with the v1.0 card the SDK expects and nothing unserved switched on', () => {
  const card = seen.card;
  expect(seen.same_card_at_both_paths).toBe(true);
  expect(card.supportedInterfaces).toEqual([expect.objectContaining({ url: `${svc.urls.main}/a2a`, protocolBinding: 'HTTP+JSON', protocolVersion: '1.0' })]);
  expect(card.capabilities).toMatchObject({ streaming: false, pushNotifications: false, extendedAgentCard: false });
  // Contacting the agent needs no credential, so the card requires none.
  expect(card.securityRequirements).toEqual([]);
  expect(card.skills.length).toBeGreaterThan(0);
});

test('every operation of the advertised interface answers through the SDK client', async () => {
  // ROLE_AGENT is 2 in the SDK's enum.
  expect(seen.send_message).toMatchObject({ ok: true, value: { role: 2 } });
  expect(JSON.stringify(seen.send_message.value)).toContain(`${svc.urls.main}/a2a/endpoints/summary`);
  // streaming is off, so the SDK falls back to SendMessage: one answer.
  expect(seen.send_message_stream).toMatchObject({ ok: true });
  expect(seen.send_message_stream.value).toHaveLength(1);
  // Typed protocol errors: the route answered in the binding's shape, not a bare 404.
  expect(seen.get_task).toMatchObject({ ok: false, error: 'TaskNotFoundError' });
  expect(seen.cancel_task).toMatchObject({ ok: false, error: 'TaskNotFoundError' });
  expect(seen.list_tasks).toMatchObject({ ok: true, value: { tasks: [], totalSize: 0 } });
  // The client refuses push configs itself (capabilities.pushNotifications is false) ...
  expect(seen.get_push_config).toMatchObject({ ok: false, error: 'PushNotificationNotSupportedError' });
  // ... and a client that ignores the card still gets the binding's typed errors, not a 404.
  const direct = async (method: string, p: string, body?: unknown) => http(method, `${svc.urls.main}/a2a${p}`, body === undefined ? {} : { body });
  const reasons = await Promise.all([
    direct('POST', '/message:stream', { message: { messageId: 'm-3', role: 'ROLE_USER', parts: [{ text: 'hi' }] } }),
    direct('GET', '/tasks/t-1:subscribe'),
    direct('GET', '/tasks/t-1/pushNotificationConfigs'),
    direct('GET', '/extendedAgentCard')
  ]);
  expect(reasons.map((r) => [r.status, r.body.error.details[0].reason])).toEqual([
    [400, 'UNSUPPORTED_OPERATION'],
    [400, 'UNSUPPORTED_OPERATION'],
    [400, 'PUSH_NOTIFICATION_NOT_SUPPORTED'],
    [400, 'EXTENDED_AGENT_CARD_NOT_CONFIGURED']
  ]);
  const malformed = await direct('POST', '/message:send', { message: { role: 'ROLE_USER' } });
  expect([malformed.status, malformed.body.error.details[0].reason]).toEqual([400, 'INVALID_PARAMS']);
});

test('every URL the card names is served', async () => {
  const card = (await http('GET', `${svc.urls.main}/.well-known/agent-card.json`)).body;
  const urls = new Set<string>([card.documentationUrl, card.provider.url, ...card.supportedInterfaces.map((i: { url: string }) => `${i.url}/tasks`)]);
  for (const ext of card.capabilities.extensions) {
    urls.add(ext.uri);
    for (const [name, value] of Object.entries(ext.params ?? {})) if (name.endsWith('_url') || name.endsWith('_uri')) urls.add(value as string);
  }
  for (const url of urls) {
    expect(url.startsWith(svc.urls.main)).toBe(true);
    const res = await fetch(url, { redirect: 'manual' });
    expect({ url, status: res.status < 400 }).toEqual({ url, status: true });
  }
  // Only schemes some served endpoint accepts (none takes OAuth access tokens yet).
  expect(Object.keys(card.securitySchemes).sort()).toEqual(['did', 'external_node', 'homologous']);
});

/** The CI venv (scripts/ci/python-venv.sh --path), or null when it has not been created on this machine. */
function pythonVenv(): string | null {
  const dir = execFileSync('bash', [path.join(ROOT, 'scripts/ci/python-venv.sh'), '--path'], { encoding: 'utf8' }).trim();
  return fs.existsSync(path.join(dir, '.complete')) ? dir : null;
}

test('the Python A2A SDK validates the card and its client works against the binding', () => {
  const venv = pythonVenv();
  if (!venv) {
    if (process.env.CI) throw new Error('the CI venv is missing: .ci/run creates it with scripts/ci/python-venv.sh');
    console.warn('skipped: no Python venv (bash scripts/ci/python-venv.sh creates it)');
    return;
  }
  const run = spawnSync(path.join(venv, 'bin/python'), [path.join(ROOT, 'scripts/ci/check_agent_card.py'), svc.urls.main], { encoding: 'utf8', timeout: 60_000 });
  if (run.status !== 0) throw new Error(`check_agent_card.py failed (${run.status}):\n${run.stdout}\n${run.stderr.slice(-3000)}`);
  expect(run.stdout).toContain('ok: card at /.well-known/agent-card.json resolves and has every REQUIRED field');
  expect(run.stdout).toContain('ok: GetTask answers TaskNotFoundError');
  expect(run.stdout).toContain('ok: ListTasks answers');
});
