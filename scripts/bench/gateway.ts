/**
 * npm run bench:gateway — the chat gateway's added latency and throughput, against the same local OpenAI-compatible
 * upstream (scripts/bench/gateway-upstream.ts) called three ways in one run:
 *   direct    the upstream itself (the baseline)
 *   gateway   our /v1/chat/completions on the whole local stack (npm start), with an S5 key: per-key limits
 *             (slots in MongoDB) and usage accounting (one record per request) on, as in production
 *   gw-exact  the same through a second API process of the stack with CHAT_KEY_CACHE_MS=0, the key read from
 *             MongoDB at every request (beside the upstream call): what exact cross-process revocation costs. It
 *             has a key of its own, so the two columns' limits do not interact (BENCH_EXACT_KEYS=off skips it;
 *             BENCH_EXACT_KEYS=shared gives it the gateway's key: two API processes serving one key, taking turns)
 *   litellm   LiteLLM's proxy (`litellm[proxy]` from PyPI, installed by this bench into
 *             ~/.cache/zhongshu-hub/litellm/<python>/ the first time; the column is skipped, with the reason,
 *             when it cannot be installed or started; BENCH_LITELLM=off skips it)
 * each at concurrency 1 and 8, non-streaming (whole answer) and streaming (time to first token: the first chunk
 * carrying content): p50, p99, requests/s, then each proxy's added p50 over direct and the ratios (targets: our
 * added p50 at most one fifth of LiteLLM's, and at least 5x its requests/s at concurrency 8).
 * BENCH_SECONDS (default 8) per cell and target, in 4 turns taken in rotation with the other targets (a pause of the
 * shared machine then falls on every column alike). Prints figures; asserts nothing. Timings on a shared machine are
 * noisy.
 */
import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort, typescriptProcess } from '../stack/process';
import { StackLog } from './stack-log';
import { BenchStack, startBenchStack } from './stack';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
/** Each cell is measured in this many turns per target (see the main loop). */
const SLICES = 4;
const CONCURRENCIES = [1, 8];
const MODES = ['json', 'ttft'] as const;
type Mode = (typeof MODES)[number];
const PROMPT = 'hello from the gateway bench, please answer briefly';

interface Target {
  name: 'direct' | 'gateway' | 'gw-exact' | 'litellm';
  url: string;
  model: string;
  headers: Record<string, string>;
}

interface Figures {
  ops: number;
  errors: number;
  perSec: number;
  p50: number;
  p99: number;
}

/** One request: the whole answer (json) or the time to the first content chunk (ttft, the stream then read to its end). */
async function once(t: Target, mode: Mode): Promise<number | null> {
  const t0 = performance.now();
  const body = {
    model: t.model,
    messages: [{ role: 'user', content: PROMPT }],
    max_tokens: 32,
    ...(mode === 'ttft' ? { stream: true, stream_options: { include_usage: true } } : {})
  };
  const res = await fetch(t.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...t.headers },
    body: JSON.stringify(body)
  });
  if (mode === 'json') {
    const text = await res.text();
    return res.ok && text.includes('"choices"') ? performance.now() - t0 : null;
  }
  if (!res.ok || !res.body) {
    await res.text().catch(() => undefined);
    return null;
  }
  const decoder = new TextDecoder();
  let seen = '';
  let first: number | null = null;
  for await (const part of res.body) {
    seen += decoder.decode(part as Uint8Array, { stream: true });
    if (first === null && /"content":"[^"]/.test(seen)) first = performance.now() - t0;
    if (seen.length > 4096) seen = seen.slice(-512);
  }
  return first;
}

/** What one slice of a cell measured (figures are computed over a cell's slices together). */
interface Sample {
  latencies: number[];
  errors: number;
  seconds: number;
}

function figuresOf(samples: Sample[]): Figures {
  const latencies = samples.flatMap((s) => s.latencies).sort((a, b) => a - b);
  const seconds = samples.reduce((sum, s) => sum + s.seconds, 0);
  const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? NaN;
  return {
    ops: latencies.length,
    errors: samples.reduce((sum, s) => sum + s.errors, 0),
    perSec: latencies.length / seconds,
    p50: pct(50),
    p99: pct(99)
  };
}

async function load(t: Target, mode: Mode, concurrency: number, seconds: number): Promise<Sample> {
  const latencies: number[] = [];
  let errors = 0;
  const end = Date.now() + seconds * 1000;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (Date.now() < end) {
        const ms = await once(t, mode).catch(() => null);
        if (ms === null) errors++;
        else latencies.push(ms);
      }
    })
  );
  return { latencies, errors, seconds: (performance.now() - started) / 1000 };
}

async function waitFor(
  url: string,
  child: ChildProcess,
  what: string,
  timeoutMs: number,
  headers: Record<string, string> = {}
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${what} exited during start-up`);
    try {
      if ((await fetch(url, { headers })).ok) return;
    } catch {
      /* starting */
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`${what} did not answer ${url} within ${timeoutMs / 1000} s`);
}

function stopChild(child: ChildProcess | null): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
    setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
  });
}

async function startUpstream(log: StackLog): Promise<{ baseUrl: string; child: ChildProcess }> {
  const proc = typescriptProcess(path.join(__dirname, 'gateway-upstream.ts'));
  const child = spawn(proc.binary, proc.args, { stdio: ['ignore', 'pipe', log.fd()] });
  const baseUrl = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /UPSTREAM (\S+)/.exec(out);
      if (m) resolve(m[1]!);
    });
    child.once('exit', () => reject(new Error('the bench upstream exited')));
  });
  return { baseUrl, child };
}

/** LiteLLM's proxy in a venv under the cache dir (installed once), or the reason it cannot run here. */
async function startLiteLlm(
  upstreamBase: string,
  log: StackLog
): Promise<{ target: Target; child: ChildProcess; version: string } | { skipped: string }> {
  if (process.env.BENCH_LITELLM === 'off') return { skipped: 'BENCH_LITELLM=off' };
  const python = process.env.PYTHON ?? 'python3';
  let pyVersion: string;
  try {
    pyVersion = execFileSync(python, ['-c', 'import sys; print("py%d.%d" % sys.version_info[:2])'], {
      encoding: 'utf8'
    }).trim();
  } catch {
    return { skipped: `no ${python} on this machine` };
  }
  const venv = path.join(
    process.env.ZH_CACHE_DIR ?? path.join(os.homedir(), '.cache', 'zhongshu-hub'),
    'litellm',
    pyVersion
  );
  const bin = (name: string) => path.join(venv, 'bin', name);
  if (!fs.existsSync(path.join(venv, '.complete'))) {
    console.log(`installing LiteLLM's proxy (litellm[proxy] from PyPI) into ${venv} (once; a few minutes)`);
    try {
      fs.rmSync(venv, { recursive: true, force: true });
      fs.mkdirSync(path.dirname(venv), { recursive: true });
      execFileSync(python, ['-m', 'venv', venv], { stdio: ['ignore', log.fd(), log.fd()] });
      execFileSync(bin('pip'), ['install', '--quiet', '--disable-pip-version-check', 'litellm[proxy]'], {
        stdio: ['ignore', log.fd(), log.fd()],
        timeout: 20 * 60_000
      });
      fs.writeFileSync(path.join(venv, '.complete'), '');
    } catch (err) {
      return {
        skipped: `could not install litellm[proxy] into ${venv}: ${(err as Error).message.split('\n')[0]} (details in ${log.path})`
      };
    }
  }
  const version = (() => {
    try {
      return /Version: (\S+)/.exec(execFileSync(bin('pip'), ['show', 'litellm'], { encoding: 'utf8' }))?.[1] ?? '?';
    } catch {
      return '?';
    }
  })();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'zhongshu-bench-litellm-'));
  const config = path.join(dir, 'config.yaml');
  const masterKey = 'sk-bench-master-key';
  fs.writeFileSync(
    config,
    [
      'model_list:',
      '  - model_name: bench',
      '    litellm_params:',
      '      model: openai/bench-upstream',
      `      api_base: ${upstreamBase}`,
      '      api_key: sk-bench-upstream',
      'general_settings:',
      `  master_key: ${masterKey}`,
      'litellm_settings:',
      '  drop_params: true',
      ''
    ].join('\n')
  );
  const port = await freePort();
  const child = spawn(
    bin('litellm'),
    ['--config', config, '--host', '127.0.0.1', '--port', String(port), '--num_workers', '1'],
    {
      stdio: ['ignore', log.fd(), log.fd()],
      env: { ...process.env, LITELLM_LOG: 'ERROR', LITELLM_TELEMETRY: 'False', NO_DOCS: 'True' },
      cwd: dir
    }
  );
  try {
    await waitFor(`http://127.0.0.1:${port}/health/liveliness`, child, "LiteLLM's proxy", 180_000);
  } catch (err) {
    await stopChild(child);
    return { skipped: `LiteLLM's proxy did not start: ${(err as Error).message} (its output is in ${log.path})` };
  }
  return {
    target: {
      name: 'litellm',
      url: `http://127.0.0.1:${port}/v1/chat/completions`,
      model: 'bench',
      headers: { authorization: `Bearer ${masterKey}` }
    },
    child,
    version
  };
}

const ms = (v: number) => (Number.isFinite(v) ? `${v.toFixed(2)} ms` : '—');
const row = (name: string, f: Figures) =>
  `  ${name.padEnd(8)} p50 ${ms(f.p50).padStart(10)}   p99 ${ms(f.p99).padStart(10)}   ${f.perSec.toFixed(0).padStart(5)} req/s   (${f.ops} ok, ${f.errors} errors)`;

async function main(): Promise<void> {
  const log = new StackLog('gateway');
  console.log(
    `bench:gateway — ${SECONDS} s per cell, concurrency ${CONCURRENCIES.join(' and ')}, non-streaming and time to first token`
  );
  console.log(
    `machine: ${os.cpus().length} cores, load average ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')} (other work on the machine makes these figures noisy)`
  );
  let stack: BenchStack | null = null;
  let upstream: ChildProcess | null = null;
  let litellm: ChildProcess | null = null;
  let failure: unknown = null;
  try {
    const up = await startUpstream(log);
    upstream = up.child;
    const providers = [
      {
        name: 'bench',
        base_url: up.baseUrl,
        api_key_env: 'BENCH_UPSTREAM_KEY',
        timeout_ms: 30_000,
        models: [{ id: 'bench', upstream: 'bench-upstream', price: { prompt_per_1k: 0.001, completion_per_1k: 0.002 } }]
      }
    ];
    const [stackStarted, lite] = await Promise.all([
      startBenchStack('gateway', log, {
        CHAT_PROVIDERS: JSON.stringify(providers),
        BENCH_UPSTREAM_KEY: 'sk-bench-upstream',
        // Limits stay on (every request takes its per-minute and per-day slots) but high enough not to refuse.
        CHAT_PLANS: JSON.stringify({
          S5: { requests_per_minute: 1_000_000, requests_per_day: 100_000_000, tokens_per_day: 1e12 }
        }),
        DEPLOY_WEB: 'off'
      }),
      startLiteLlm(up.baseUrl, log)
    ]);
    stack = stackStarted;
    const issueKey = async (): Promise<string> => {
      const issued = await fetch(`${stack!.base}/admin/api-keys`, {
        method: 'POST',
        headers: { authorization: `Bearer ${stack!.adminToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ label: 'bench', plan: 'S5' })
      });
      if (issued.status !== 201) throw new Error(`could not issue an API key: ${issued.status} ${await issued.text()}`);
      return ((await issued.json()) as { api_key: string }).api_key;
    };
    const apiKey = await issueKey();

    const targets: Target[] = [
      {
        name: 'direct',
        url: `${up.baseUrl}/chat/completions`,
        model: 'bench-upstream',
        headers: { authorization: 'Bearer sk-bench-upstream' }
      },
      {
        name: 'gateway',
        url: `${stack.base}/v1/chat/completions`,
        model: 'bench',
        headers: { authorization: `Bearer ${apiKey}` }
      }
    ];
    if (process.env.BENCH_EXACT_KEYS !== 'off') {
      const exact = await stack.startApi({ CHAT_KEY_CACHE_MS: '0' });
      const shared = process.env.BENCH_EXACT_KEYS === 'shared';
      targets.push({
        name: 'gw-exact',
        url: `${exact}/v1/chat/completions`,
        model: 'bench',
        headers: { authorization: `Bearer ${shared ? apiKey : await issueKey()}` }
      });
      console.log(
        `gw-exact: a second API process with CHAT_KEY_CACHE_MS=0 (its key read at every request), ${shared ? "the gateway's key" : 'a key of its own'}`
      );
    }
    if ('target' in lite) {
      litellm = lite.child;
      targets.push(lite.target);
      console.log(`LiteLLM proxy ${lite.version} (litellm[proxy], 1 worker, master key, no database)`);
    } else console.log(`LiteLLM column skipped: ${lite.skipped}`);

    // Warm-up: connections, JIT, the key's counters.
    for (const t of targets) for (const mode of MODES) await load(t, mode, 2, 1);

    const results = new Map<string, Figures>();
    for (const mode of MODES) {
      for (const c of CONCURRENCIES) {
        console.log(
          `\n${mode === 'json' ? 'non-streaming (whole answer)' : 'streaming, time to first token'}, concurrency ${c}:`
        );
        // The targets take turns, SLICES times a cell, so a pause of the shared machine falls on all of them alike.
        const samples = new Map<string, Sample[]>(targets.map((t) => [t.name, []]));
        for (let slice = 0; slice < SLICES; slice++) {
          for (const t of targets) {
            stack.alive();
            samples.get(t.name)!.push(await load(t, mode, c, SECONDS / SLICES));
          }
        }
        for (const t of targets) {
          const f = figuresOf(samples.get(t.name)!);
          results.set(`${t.name}|${mode}|${c}`, f);
          console.log(row(t.name, f));
        }
        const direct = results.get(`direct|${mode}|${c}`)!;
        const ours = results.get(`gateway|${mode}|${c}`)!;
        const theirs = results.get(`litellm|${mode}|${c}`);
        const oursAdded = ours.p50 - direct.p50;
        const exact = results.get(`gw-exact|${mode}|${c}`);
        let line = `  added p50: gateway ${ms(oursAdded)}${exact ? `, gw-exact ${ms(exact.p50 - direct.p50)}` : ''}`;
        if (theirs) {
          const theirsAdded = theirs.p50 - direct.p50;
          line += `, litellm ${ms(theirsAdded)}; ours/litellm ${(oursAdded / theirsAdded).toFixed(2)} (target ≤ 0.20)${exact ? ` (gw-exact ${((exact.p50 - direct.p50) / theirsAdded).toFixed(2)})` : ''}; req/s gateway/litellm ${(ours.perSec / theirs.perSec).toFixed(1)}x${c === 8 ? ' (target ≥ 5x)' : ''}${exact ? ` (gw-exact ${(exact.perSec / theirs.perSec).toFixed(1)}x)` : ''}`;
        }
        console.log(line);
      }
    }
  } catch (err) {
    failure = err;
  } finally {
    await Promise.all([stack?.stop(), stopChild(litellm), stopChild(upstream)]);
  }
  if (failure) {
    log.reportFailure(failure);
    process.exit(1);
  }
  log.reportSuccess();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
