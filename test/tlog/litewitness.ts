/**
 * torchwood's litewitness (filippo.io/torchwood/cmd/litewitness, v0.6.1), an independent C2SP tlog-witness, for
 * tests: built once from the Go module proxy and cached outside the clone like the stack's tools
 * (scripts/install-tools.sh), under $ZHONGSHU_TOOLS_DIR or ~/.cache/zhongshu-hub/tools/litewitness-v0.6.1/; run with
 * its Ed25519 key in a dedicated ssh-agent (as its README recommends) and its SQLite database under the test's data
 * directory.
 *
 * Which logs it witnesses lives in that database (tables `log`: origin, tree_size, tree_hash; `key`: origin, note
 * verifier key). Its companion witnessctl (`add-log`, `add-key`) does not build from the module proxy here (it needs
 * sigsum.org/sigsum-go, which the proxy refuses), so addLog runs witnessctl's two statements with the sqlite3 CLI, as
 * witnessctl does: a log starting at size 0 with the empty tree's hash, and its key. litewitness reads both at every
 * request, so a log can be added while it runs.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort, ServerHandle, spawnServer } from '../../scripts/stack/process';
import { cosignatureVerifierKey } from '../../core/tlog/cosignature.node';

export const LITEWITNESS_MODULE = 'filippo.io/torchwood/cmd/litewitness';
export const LITEWITNESS_VERSION = 'v0.6.1';

/** What litewitness needs besides Go: ssh-keygen, ssh-agent, ssh-add (openssh-client) and sqlite3. */
export function litewitnessPrerequisites(): string[] {
  const missing = ['go', 'ssh-keygen', 'ssh-agent', 'ssh-add', 'sqlite3'].filter(
    (cmd) => spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status !== 0
  );
  return missing;
}

/** The litewitness binary, built with `go install` the first time (a minute or two), then from the cache. */
export function litewitnessBinary(): string {
  const tools =
    process.env.ZHONGSHU_TOOLS_DIR ??
    path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'zhongshu-hub', 'tools');
  const dir = path.join(tools, `litewitness-${LITEWITNESS_VERSION}`);
  const bin = path.join(dir, 'litewitness');
  if (fs.existsSync(bin)) return bin;
  fs.mkdirSync(dir, { recursive: true });
  // Built into a scratch directory and moved into place: an interrupted build never leaves half a binary there.
  const tmp = fs.mkdtempSync(path.join(dir, '.build.'));
  try {
    const built = spawnSync('go', ['install', '-trimpath', `${LITEWITNESS_MODULE}@${LITEWITNESS_VERSION}`], {
      cwd: tmp,
      env: { ...process.env, GOBIN: tmp },
      encoding: 'utf8'
    });
    if (built.status !== 0)
      throw new Error(`go install ${LITEWITNESS_MODULE}@${LITEWITNESS_VERSION}:\n${built.stderr}`);
    fs.renameSync(path.join(tmp, 'litewitness'), bin);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  return bin;
}

export interface Litewitness {
  name: string;
  /** Its submission prefix: it serves POST /add-checkpoint at its root. */
  url: string;
  /** Its cosignature/v1 verifier key, computed here from the public key in the ssh-agent. */
  verifierKey: string;
  /** The verifier key litewitness itself logged at its start. */
  loggedVerifierKey: string;
  db: string;
  /** Adds a log to witness (witnessctl add-log + add-key), from size 0. */
  addLog(origin: string, logVerifierKey: string): void;
  /** The size and base64 root litewitness holds for `origin` (its own record, in its database). */
  treeOf(origin: string): { size: number; hash: string } | null;
  stop(): Promise<void>;
}

const run = (cmd: string, args: string[], env?: NodeJS.ProcessEnv): string => {
  const res = spawnSync(cmd, args, { encoding: 'utf8', env: env ?? process.env });
  if (res.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${res.stderr}`);
  return res.stdout;
};
const sqlString = (s: string) => `'${s.replace(/'/g, "''")}'`;

async function waitFor(what: string, check: () => boolean | Promise<boolean>, handle?: ServerHandle): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (handle && handle.child.exitCode !== null) throw new Error(`${handle.name} exited: ${handle.output(20)}`);
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what} within 30 s${handle ? `: ${handle.output(20)}` : ''}`);
}

/** Starts a dedicated ssh-agent holding a new Ed25519 key, and litewitness on a free port using it. */
export async function startLitewitness(dataDir: string, name: string): Promise<Litewitness> {
  const bin = litewitnessBinary();
  const dir = fs.mkdtempSync(path.join(dataDir, 'litewitness-'));
  const keyFile = path.join(dir, 'witness-key');
  run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', name, '-f', keyFile]);
  // The public key: the last 32 bytes of the ssh-ed25519 blob (string "ssh-ed25519", string key).
  const blob = Buffer.from(fs.readFileSync(`${keyFile}.pub`, 'utf8').split(' ')[1]!, 'base64');
  const publicKey = blob.subarray(blob.length - 32);
  const fingerprint = run('ssh-keygen', ['-l', '-E', 'sha256', '-f', `${keyFile}.pub`]).split(' ')[1]!;

  // A socket path must stay short (108 bytes): the agent's lives in a short directory of its own.
  const sockDir = fs.mkdtempSync(path.join(os.tmpdir(), 'lw-'));
  const sock = path.join(sockDir, 'agent.sock');
  const agent = spawnServer({
    name: 'ssh-agent',
    binary: 'ssh-agent',
    args: ['-D', '-a', sock],
    pidFile: path.join(dir, 'ssh-agent.pid'),
    echo: false
  });
  const handles: ServerHandle[] = [agent];
  const stop = async () => {
    for (const h of handles.reverse()) await h.stop();
    fs.rmSync(sockDir, { recursive: true, force: true });
  };
  try {
    await waitFor('ssh-agent listening', () => fs.existsSync(sock), agent);
    run('ssh-add', ['-q', keyFile], { ...process.env, SSH_AUTH_SOCK: sock });

    const port = await freePort();
    const db = path.join(dir, 'litewitness.db');
    const witness = spawnServer({
      name: 'litewitness',
      binary: bin,
      args: ['-name', name, '-db', db, '-ssh-agent', sock, '-key', fingerprint, '-listen', `127.0.0.1:${port}`],
      pidFile: path.join(dir, 'litewitness.pid'),
      echo: process.env.ZH_TEST_ECHO === '1',
      // It shuts down gracefully on an interrupt.
      stopSignal: 'SIGINT'
    });
    handles.push(witness);
    // It logs "listening" before it binds: ready once its index page answers.
    const ready = () =>
      fetch(`http://127.0.0.1:${port}/`).then(
        (res) => res.ok,
        () => false
      );
    await waitFor('litewitness answering', ready, witness);
    const logged = /msg="verifier key" vkey=(\S+)/.exec(witness.output())?.[1] ?? '';
    return {
      name,
      url: `http://127.0.0.1:${port}`,
      verifierKey: cosignatureVerifierKey(name, publicKey),
      loggedVerifierKey: logged,
      db,
      addLog(origin, logVerifierKey) {
        const emptyTree = createHash('sha256').digest('base64');
        run('sqlite3', [
          db,
          `PRAGMA foreign_keys = ON; ` +
            `INSERT INTO log (origin, tree_size, tree_hash) VALUES (${sqlString(origin)}, 0, ${sqlString(emptyTree)}); ` +
            `INSERT INTO key (origin, key) VALUES (${sqlString(origin)}, ${sqlString(logVerifierKey)});`
        ]);
      },
      treeOf(origin) {
        const out = run('sqlite3', [
          '-separator',
          ' ',
          db,
          `SELECT tree_size, tree_hash FROM log WHERE origin = ${sqlString(origin)};`
        ]).trim();
        if (!out) return null;
        const [size, hash] = out.split(' ');
        return { size: Number(size), hash: hash! };
      },
      stop
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
