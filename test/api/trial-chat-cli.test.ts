/**
 * `npm run admin -- …` for the chat gateway and the trial chat's knowledge base, run as an operator runs it
 * (scripts/admin.ts against a running service): knowledge import from Markdown and JSON files, the knowledge
 * counts, a plan change, a key group under an S4 key and a key issued into it, the key's groups and usage.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { http, startTestService, TestService } from '../support/service';

let svc: TestService;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'zh-admin-cli-'));
const ROOT = path.resolve(__dirname, '..', '..');

function admin(...args: string[]): Promise<{ code: number; out: any; text: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', path.join(ROOT, 'scripts', 'admin.ts'), ...args],
      {
        cwd: ROOT,
        env: { ...process.env, ADMIN_URL: svc.urls.main, ADMIN_TOKEN: svc.adminToken, DATA_DIR: dir, PORT: '0' }
      },
      (err, stdout) => {
        let out: unknown = undefined;
        try {
          out = JSON.parse(stdout);
        } catch {
          out = undefined;
        }
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, out, text: stdout });
      }
    );
  });
}

beforeAll(async () => {
  svc = await startTestService({}, { worker: false });
});
afterAll(async () => {
  await svc?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

it('imports knowledge from a Markdown and a JSON file and reports the counts', async () => {
  const md = path.join(dir, 'kb.md');
  fs.writeFileSync(
    md,
    '## Q: What is a knowledge card?\nA question with its answer.\n\n## Passages\nDocuments are split into passages.\n'
  );
  const json = path.join(dir, 'kb.json');
  fs.writeFileSync(json, JSON.stringify({ cards: [{ question: '什么是知识卡片？', answer: '一个问题及其答案。' }] }));
  const a = await admin('knowledge-import', md);
  expect(a.code).toBe(0);
  expect(a.out).toMatchObject({ ok: true, cards_created: 1, documents_created: 1 });
  const b = await admin('knowledge-import', json);
  expect(b.out).toMatchObject({ ok: true, cards_created: 1, documents_created: 0 });
  const counts = await admin('knowledge');
  expect(counts.out).toMatchObject({ ok: true, cards: 2, documents: 1, version: 2 });
});

it('changes a plan, creates a key group, issues a key into it, lists groups and usage', async () => {
  const issued = await admin('api-key', 'cli owner', 'S1');
  expect(issued.code).toBe(0);
  const keyId = issued.out.key_id as string;
  const refused = await admin('key-group', keyId, 'team');
  expect(refused.code).not.toBe(0);
  expect(refused.out.error).toBe('conflict');
  expect((await admin('api-key-plan', keyId, 'S4')).out).toMatchObject({ ok: true, plan: 'S4', previous_plan: 'S1' });
  const group = await admin('key-group', keyId, 'team');
  expect(group.code).toBe(0);
  const groupId = group.out.group.group_id as string;
  const member = await admin('key-group-key', groupId, 'member one', 'S2');
  expect(member.out).toMatchObject({ ok: true, group_id: groupId, plan: 'S2' });
  expect(member.out.api_key).toMatch(/^zk_/);
  const groups = await admin('key-groups', keyId);
  expect(groups.out.groups[0].keys.map((k: { key_id: string }) => k.key_id)).toEqual([member.out.key_id]);
  const usage = await admin('api-key-usage', member.out.key_id, '3');
  expect(usage.out).toMatchObject({ ok: true, usage: { key_id: member.out.key_id, plan: 'S2' } });
  // The same through HTTP, to be sure the CLI changed the service and not a copy.
  const viaHttp = await http('GET', `${svc.urls.main}/admin/api-keys/${keyId}/groups`, {
    headers: { authorization: `Bearer ${svc.adminToken}` }
  });
  expect(viaHttp.body.groups).toHaveLength(1);
});
