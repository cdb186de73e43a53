#!/usr/bin/env node
/**
 * zhongshu-node: the SDK from a shell. `join` registers (or loads) the node, `run` beats and sends the outbox until
 * Ctrl-C (and with --exec or --call works tasks through a shell command or a local HTTP endpoint), `write` records one truth and waits for its acknowledgement, `status` shows the hub and the node,
 * `verify` checks the checkpoint, its consistency with the last one seen and the outbox's acknowledged writes.
 * Messages go to stderr, results (one line each) to stdout; exit 1 on an error, 2 on a usage error.
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import { VerificationError } from './checkpoint';
import { HubNode, type HubNodeOptions } from './client';
import { loadCredentials } from './credentials';
import type { Logger } from './logger';
import { httpTaskHandler, shellTaskHandler } from './task-handlers';
import type { TaskEvent } from './worker';

const COMMON = `
  --hub <url>            the hub's main listener (or ZHONGSHU_HUB_URL)
  --state <dir>          the node's state dir: credentials (0600), outbox, last checkpoint (default ./.zhongshu-node)
  --did <did>            the DID truth writes are made with (or ZHONGSHU_DID)
  --verifier-key <key>   the checkpoint verifier key to pin (or ZHONGSHU_VERIFIER_KEY)
  --verbose              log what the SDK does (never the node key)
  --help                 this help`;

const HELP: Record<string, string> = {
  '': `usage: zhongshu-node <command> [options]

commands:
  join      register the node (or load its saved credentials) and send one heartbeat
  run       heartbeat, send the outbox and verify until Ctrl-C; work tasks with --exec or --call
  write     record a truth: zhongshu-node write <key> '<json object>' [--type <truth type>]
  status    the hub's ledger and the node's state and outbox
  verify    check the checkpoint, its consistency with the last one seen, and the outbox's writes

zhongshu-node <command> --help for its options.`,
  join: `usage: zhongshu-node join --hub <url> --name <name> [--brand <code>] [--capability <name>]...
${COMMON}`,
  run: `usage: zhongshu-node run --hub <url> [--did <did>] [--exec '<command>' | --call <url>] [--max-tasks <n>]
                         [--task-timeout <s>] [--poll <s>]
  Heartbeats, sends the outbox and verifies until Ctrl-C; with --exec or --call it also works tasks: while the node
  is online it claims queued tasks whose required capabilities it declared at join, at most --max-tasks (1) at once.
  --exec '<command>'     run the command with /bin/sh -c per task, in a process group of its own: the task's JSON
                         ({"task_id","type","payload","attempts",…}) on stdin, and ZHONGSHU_TASK_ID,
                         ZHONGSHU_TASK_TYPE, ZHONGSHU_TASK_ATTEMPT in its environment. Exit 0: the task is done,
                         its result the JSON object printed on stdout (nothing: {}). Another status: the task
                         fails, the last lines of stderr its reason. A cancel by the submitter, a lost claim,
                         Ctrl-C or the timeout sends SIGTERM to the group (SIGKILL 5 s later).
  --call <url>           POST the task's JSON to a local HTTP endpoint per task (headers X-Zhongshu-Task-Id,
                         X-Zhongshu-Task-Type). A 2xx answer with a JSON object (or nothing) completes the task;
                         any other answer fails it with the status and the start of the body. A cancel, a lost
                         claim, Ctrl-C or the timeout aborts the request.
  --task-timeout <s>     give up on a task after this long and fail it (default 600)
  --poll <s>             between claims while nothing is queued (default 5)
  Prints one line per event on stdout: state changes, writes, verified entries, and per task
  "task <id> <type> claimed", "… done in 1.2 s", "… failed: <reason>", "… canceled", "… lost" (claim lapsed).
${COMMON}`,
  write: `usage: zhongshu-node write <key> '<json object>' --hub <url> --did <did> [--type <truth type>] [--timeout <s>]
  Waits up to --timeout seconds (30) for the hub's answer; a write not yet acknowledged stays in the outbox, and
  the next write, run or verify sends it.
${COMMON}`,
  status: `usage: zhongshu-node status --hub <url>
${COMMON}`,
  verify: `usage: zhongshu-node verify --hub <url> [--did <did>] [--verifier-key <key>] [--witness <key>]... [--quorum <k>]
  --witness: a witness's cosignature key (repeat for each); --quorum: how many must cosign (default: all).
  Exits 1 with a FAIL line when a checkpoint signature, a cosignature, a consistency proof or an inclusion proof
  does not verify, or when fewer witnesses than the quorum cosigned the checkpoint.
${COMMON}`
};

class UsageError extends Error {}

const stderrLogger: Logger = {
  debug: () => undefined,
  info: (m, f) => process.stderr.write(`${m}${f ? ` ${JSON.stringify(f)}` : ''}\n`),
  warn: (m, f) => process.stderr.write(`warning: ${m}${f ? ` ${JSON.stringify(f)}` : ''}\n`),
  error: (m, f) => process.stderr.write(`error: ${m}${f ? ` ${JSON.stringify(f)}` : ''}\n`)
};

export async function main(argv: string[]): Promise<number> {
  const command = argv[0] && !argv[0].startsWith('-') ? argv[0] : '';
  const { values, positionals } = parseArgs({
    args: command ? argv.slice(1) : argv,
    allowPositionals: true,
    options: {
      hub: { type: 'string' },
      state: { type: 'string' },
      did: { type: 'string' },
      'verifier-key': { type: 'string' },
      witness: { type: 'string', multiple: true },
      quorum: { type: 'string' },
      name: { type: 'string' },
      brand: { type: 'string' },
      capability: { type: 'string', multiple: true },
      type: { type: 'string' },
      timeout: { type: 'string' },
      exec: { type: 'string' },
      call: { type: 'string' },
      'max-tasks': { type: 'string' },
      'task-timeout': { type: 'string' },
      poll: { type: 'string' },
      verbose: { type: 'boolean' },
      help: { type: 'boolean' }
    }
  });
  if (values.help || !command) {
    process.stdout.write(`${HELP[command] ?? HELP['']}\n`);
    return command || values.help ? 0 : 2;
  }
  if (!(command in HELP)) throw new UsageError(`unknown command ${command}`);
  const hubUrl = values.hub ?? process.env.ZHONGSHU_HUB_URL;
  if (!hubUrl) throw new UsageError('--hub is required');
  const stateDir = path.resolve(values.state ?? '.zhongshu-node');
  const did = values.did ?? process.env.ZHONGSHU_DID;
  const base: HubNodeOptions = {
    hubUrl,
    stateDir,
    did,
    verifierKey: values['verifier-key'] ?? process.env.ZHONGSHU_VERIFIER_KEY,
    witnesses: values.witness,
    witnessQuorum: values.quorum === undefined ? undefined : Number(values.quorum),
    keepUnverified: true, // `verify` proves what `write` and `run` left
    logger: values.verbose ? stderrLogger : { ...stderrLogger, info: () => undefined, warn: () => undefined }
  };
  const out = (line: string) => process.stdout.write(`${line}\n`);

  switch (command) {
    case 'join': {
      if (!values.name && !loadCredentials(path.join(stateDir, 'credentials.json')))
        throw new UsageError('--name is required for a first join');
      const node = new HubNode({
        ...base,
        verify: false,
        heartbeatIntervalMs: 3_600_000,
        register: values.name
          ? {
              name: values.name,
              brand: { code: values.brand ?? 'custom' },
              capabilities: { declared: values.capability ?? [] }
            }
          : undefined
      });
      const beat = new Promise<string>((resolve) => node.once('heartbeat', (a: { state: string }) => resolve(a.state)));
      await node.start();
      const state = await Promise.race([beat, new Promise<string>((r) => setTimeout(() => r(node.state), 10_000))]);
      await node.stop();
      out(`${node.nodeId} ${state}`);
      process.stderr.write(`credentials in ${path.join(stateDir, 'credentials.json')} (mode 0600)\n`);
      return 0;
    }
    case 'run': {
      const worker = taskWorker(values);
      const node = new HubNode({ ...base, logger: stderrLogger, worker: worker?.options });
      node.on('state', (s: string, p: string) => {
        out(`state ${p} -> ${s}`);
        if (worker && s === 'pending_review')
          process.stderr.write('the node is pending review: it claims tasks once a reviewer approves it\n');
      });
      node.on('write', (r: { id: string; state: string; seq?: number }) =>
        out(`write ${r.id} ${r.state}${r.seq ? ` seq ${r.seq}` : ''}`)
      );
      node.on('verified', (r: { seq: number }, cp: { size: number }) =>
        out(`verified seq ${r.seq} in tree ${cp.size}`)
      );
      node.on('error', (e: Error) => process.stderr.write(`error: ${e.message}\n`));
      const claimedAt = new Map<string, number>();
      node.on('task', (e: TaskEvent) => {
        if (e.state === 'claimed') {
          claimedAt.set(e.task_id, Date.now());
          return out(`task ${e.task_id} ${e.type} claimed`);
        }
        const took = `${((Date.now() - (claimedAt.get(e.task_id) ?? Date.now())) / 1000).toFixed(1)} s`;
        claimedAt.delete(e.task_id);
        const how = {
          done: `done in ${took}`,
          failed: `failed after ${took}: ${e.state === 'failed' ? e.reason : ''}`,
          canceled: 'canceled by its submitter: stopped',
          lost: 'lost: its lease lapsed and the hub gave it to another node; stopped',
          input_required: `waiting for its submitter's answer after ${took}`
        }[e.state];
        out(`task ${e.task_id} ${e.type} ${how}`);
      });
      await node.start();
      out(`running as ${node.nodeId}${worker ? `; working tasks with ${worker.label}` : ''}; Ctrl-C stops`);
      await new Promise<void>((resolve) => {
        process.once('SIGINT', resolve);
        process.once('SIGTERM', resolve);
      });
      if (claimedAt.size > 0)
        process.stderr.write(
          `stopping: ${claimedAt.size} task(s) in progress are stopped and not reported (the hub queues them again)\n`
        );
      await node.stop();
      return 0;
    }
    case 'write': {
      const [key, json] = positionals;
      if (!key || json === undefined) throw new UsageError("write needs <key> and '<json object>'");
      let value: Record<string, unknown>;
      try {
        value = JSON.parse(json);
      } catch {
        throw new UsageError('the value is not JSON');
      }
      const node = new HubNode({ ...base, heartbeat: false, verify: false });
      const handle = node.write({ key, value, truth_type: values.type });
      await node.start();
      const timeoutS = Number(values.timeout ?? 30);
      const outcome = await Promise.race([
        handle.done,
        new Promise<undefined>((r) => setTimeout(() => r(undefined), timeoutS * 1000).unref())
      ]).finally(() => node.stop());
      if (!outcome) {
        process.stderr.write(`not acknowledged within ${timeoutS} s: ${handle.id} stays in the outbox\n`);
        out(`${handle.id} ${node.outbox.get(handle.id)?.state ?? 'pending'}`);
        return 1;
      }
      out(
        outcome.state === 'acknowledged'
          ? `${outcome.id} acknowledged seq ${outcome.seq}`
          : `${outcome.id} ${outcome.state}`
      );
      return 0;
    }
    case 'status': {
      const node = new HubNode({ ...base, heartbeat: false, verify: false, did: undefined });
      const status = await node.status();
      out(`hub ${status.service} ${status.hub_version}: ${status.truth_count} entries, root ${status.merkle_root}`);
      const saved = loadCredentials(path.join(stateDir, 'credentials.json'));
      if (saved) {
        const res = await node.http.request('GET', `/a2a/nodes/${encodeURIComponent(saved.node_id)}`);
        out(`node ${saved.node_id} ${res.body?.node?.state ?? res.body?.state ?? `unknown (${res.status})`}`);
      }
      const c = node.outbox.counts();
      out(
        `outbox pending ${c.pending} held ${c.held} acknowledged ${c.acknowledged} unverified ${c.unverified} failed ${c.failed}`
      );
      node.outbox.close();
      return 0;
    }
    case 'verify': {
      if (!did) throw new UsageError('verify needs the --did the writes were made with');
      const node = new HubNode({ ...base, heartbeat: false, verify: true });
      const last = node.outbox.counts();
      const failures: VerificationError[] = [];
      node.on('error', (e: Error) => {
        if (e instanceof VerificationError) failures.push(e);
        else process.stderr.write(`error: ${e.message}\n`);
      });
      try {
        const { checkpoint, proven } = await node.verifyNow();
        for (const f of failures) out(`FAIL: ${f.kind}: ${f.message}`);
        if (failures.length > 0) return 1;
        out(`OK ${checkpoint.origin}: ${checkpoint.size} entries, root ${checkpoint.root.toString('hex')}`);
        out(`proven ${proven} of ${last.unverified} acknowledged writes`);
        return 0;
      } finally {
        await node.stop();
      }
    }
  }
  return 2;
}

/**
 * The worker `run` gets from --exec or --call (none without either), checked as a usage error before anything runs.
 * Its label names the way, not the command or the URL's query, which may hold a secret.
 */
function taskWorker(values: {
  exec?: string;
  call?: string;
  'max-tasks'?: string;
  'task-timeout'?: string;
  poll?: string;
}): { options: NonNullable<HubNodeOptions['worker']>; label: string } | undefined {
  const { exec, call } = values;
  if (exec !== undefined && call !== undefined) throw new UsageError('give --exec or --call, not both');
  if (exec === undefined && call === undefined) {
    for (const o of ['max-tasks', 'task-timeout', 'poll'] as const)
      if (values[o] !== undefined) throw new UsageError(`--${o} goes with --exec or --call`);
    return undefined;
  }
  const seconds = (name: 'task-timeout' | 'poll', fallback: number) => {
    const v = values[name] === undefined ? fallback : Number(values[name]);
    if (!Number.isFinite(v) || v <= 0) throw new UsageError(`--${name} is a number of seconds above 0`);
    return v * 1000;
  };
  const maxTasks = values['max-tasks'] === undefined ? 1 : Number(values['max-tasks']);
  if (!Number.isInteger(maxTasks) || maxTasks < 1 || maxTasks > 50)
    throw new UsageError('--max-tasks is a whole number from 1 to 50');
  const timeoutMs = seconds('task-timeout', 600);
  const pollMs = seconds('poll', 5);
  if (exec !== undefined) {
    if (!exec.trim()) throw new UsageError('--exec needs a command');
    return {
      options: { handler: shellTaskHandler(exec, { timeoutMs }), maxTasks, pollMs },
      label: 'a shell command (--exec)'
    };
  }
  let url: URL;
  try {
    url = new URL(call!);
  } catch {
    throw new UsageError(`--call needs a URL such as http://127.0.0.1:8000/task, not ${call}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UsageError('--call needs an http(s) URL');
  return {
    options: { handler: httpTaskHandler(url.href, { timeoutMs }), maxTasks, pollMs },
    label: `POST ${url.origin}${url.pathname} (--call)`
  };
}

if (require.main === module) {
  main(process.argv.slice(2)).then(
    (code) => (process.exitCode = code),
    (err: Error) => {
      if (err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
        process.stderr.write(`${err.message}\nzhongshu-node --help for the usage\n`);
        process.exitCode = 2;
      } else if (err instanceof VerificationError) {
        process.stdout.write(`FAIL: ${err.kind}: ${err.message}\n`);
        process.exitCode = 1;
      } else {
        process.stderr.write(`error: ${err.message}\n`);
        process.exitCode = 1;
      }
    }
  );
}
