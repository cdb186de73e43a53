/**
 * The daemon's audit chain file on its own (core/daemon/audit.node.ts): several processes appending at once keep one
 * valid chain (the lock file serialises them, O_APPEND + fsync); a torn last line is refused by the next append and
 * named by verify; an edited or deleted line is named.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { AuditChain, AuditChainError, verifyAuditFile } from '../../core/daemon/audit.node';

jest.setTimeout(120_000);
const ROOT = path.resolve(__dirname, '..', '..');
let dir: string;
beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'zh-daemon-audit-'))));
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

function appendInChild(dataDir: string, count: number, who: string): Promise<number> {
  const code = `
    const { AuditChain } = require(${JSON.stringify(path.join(ROOT, 'core/daemon/audit.node.ts'))});
    (async () => {
      const chain = new AuditChain(${JSON.stringify(dataDir)});
      for (let i = 0; i < ${count}; i++) await chain.append({ event: 'executed', task_id: ${JSON.stringify(who)} + '-' + i });
    })().catch((e) => { console.error(e); process.exit(1); });`;
  return new Promise((resolve) => {
    const child = spawn(path.join(ROOT, 'node_modules', '.bin', 'tsx'), ['-e', code], { stdio: 'inherit' });
    child.on('exit', (status) => resolve(status ?? 1));
  });
}

test('three processes appending at once leave one valid chain with every line', async () => {
  const statuses = await Promise.all([
    appendInChild(dir, 150, 'a'),
    appendInChild(dir, 150, 'b'),
    appendInChild(dir, 150, 'c')
  ]);
  expect(statuses).toEqual([0, 0, 0]);
  const result = verifyAuditFile(dir);
  expect(result).toMatchObject({ ok: true, length: 450, first_bad_line: null });
  const lines = fs
    .readFileSync(path.join(dir, 'daemon_audit.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  expect(lines.map((l) => l.seq)).toEqual(Array.from({ length: 450 }, (_, i) => i + 1));
  expect(new Set(lines.map((l) => l.task_id)).size).toBe(450);
  expect(fs.existsSync(path.join(dir, 'daemon_audit.jsonl.lock'))).toBe(false);
});

test('a torn last line is refused by the next append and named by verify', async () => {
  const chain = new AuditChain(dir);
  for (let i = 0; i < 3; i++) await chain.append({ event: 'admitted', dag_id: `d${i}` });
  fs.appendFileSync(chain.file, '{"at":"2026-11-21T00:00:00.000Z","event":"exec');
  await expect(chain.append({ event: 'admitted', dag_id: 'd3' })).rejects.toBeInstanceOf(AuditChainError);
  expect(verifyAuditFile(dir)).toMatchObject({
    ok: false,
    length: 3,
    first_bad_line: 4,
    reason: expect.stringContaining('torn')
  });
});

test('an edited line and a deleted line are named; a lock left by a dead process is taken over', async () => {
  const chain = new AuditChain(dir);
  for (let i = 0; i < 5; i++)
    await chain.append({ event: 'executed', task_id: `t${i}`, output_sha256: 'a'.repeat(64) });
  const original = fs.readFileSync(chain.file, 'utf8');
  const lines = original.trim().split('\n');
  fs.writeFileSync(
    chain.file,
    `${[...lines.slice(0, 2), lines[2]!.replace('"t2"', '"t9"'), ...lines.slice(3)].join('\n')}\n`
  );
  expect(verifyAuditFile(dir)).toMatchObject({
    ok: false,
    first_bad_line: 3,
    reason: expect.stringContaining('edited')
  });
  fs.writeFileSync(chain.file, `${[...lines.slice(0, 1), ...lines.slice(2)].join('\n')}\n`);
  expect(verifyAuditFile(dir)).toMatchObject({
    ok: false,
    first_bad_line: 2,
    reason: expect.stringContaining('deleted')
  });

  fs.writeFileSync(chain.file, original);
  fs.writeFileSync(`${chain.file}.lock`, '999999');
  const old = new Date(Date.now() - 60_000);
  fs.utimesSync(`${chain.file}.lock`, old, old);
  await chain.append({ event: 'executed', task_id: 't5' });
  expect(verifyAuditFile(dir)).toMatchObject({ ok: true, length: 6 });
});
