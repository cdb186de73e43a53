/**
 * The load the topology drills run under, as clients send it, through one address (the balancer): truth writes with
 * Idempotency-Keys from a few writers (each write retried with its key until it is acknowledged, never abandoned),
 * held writes (each starts a truth-approval workflow) from one more, and nodes beating. Every request has a client
 * timeout, as a real client's has: a request that hangs (its connection to a host that was cut off) counts as
 * refused and is retried. Every attempt is kept (its start, end and outcome) for the figures of each phase.
 */
import { nodeHeaders, RegisteredNode } from '../support/federation';
import { sleep } from '../../scripts/stack/process';

/** A request without an answer within this long is given up (and a write retried with its Idempotency-Key). */
export const REQUEST_TIMEOUT_MS = 10_000;
/** A write not acknowledged after this long of retries fails the drill (the service never came back). */
const WRITE_GIVE_UP_MS = 120_000;
/** What a node reports in each heartbeat. */
export const HEARTBEAT_BODY = {
  resources: { cpu_percent: 12, gpu_count: 1, memory_used_gb: 3 },
  performance: { latency_ms: 40 }
};
/** Answers that mean "not now, retry": no answer (0), the balancer's 502 and 504, the hub's 503. */
const RETRYABLE = new Set([0, 502, 503, 504]);

export type AttemptKind = 'write' | 'held' | 'heartbeat';

export interface Attempt {
  start: number;
  end: number;
  what: AttemptKind;
  ok: boolean;
  status: number;
}

export interface HeldWrite {
  key: string;
  approvalId: string;
  statusUrl: string;
  /** When it was acknowledged (ms since the epoch). */
  at: number;
}

export interface Load {
  /** Plain write key -> the seq it was acknowledged with. */
  acknowledged: Map<string, number>;
  /** Acknowledged held writes, by Idempotency-Key. */
  held: Map<string, HeldWrite>;
  attempts: Attempt[];
  /** Starts the writers, and the beats the first time (a fleet does not stop beating between drills). */
  start(): void;
  /** Stops the writers once every write under way is acknowledged; throws what any of them failed with. */
  stop(): Promise<void>;
  /** Stops the beats too. */
  close(): Promise<void>;
}

/** One HTTP exchange with a client timeout; no answer is status 0. */
export async function request(
  method: string,
  url: string,
  options: { body?: unknown; headers?: Record<string, string>; timeoutMs?: number } = {}
): Promise<{ status: number; body: any }> {
  try {
    const res = await fetch(url, {
      method,
      headers: { ...(options.body !== undefined ? { 'content-type': 'application/json' } : {}), ...options.headers },
      body: options.body !== undefined ? JSON.stringify(options.body) : undefined,
      signal: AbortSignal.timeout(options.timeoutMs ?? REQUEST_TIMEOUT_MS)
    });
    const text = await res.text();
    let body: unknown;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = text;
    }
    return { status: res.status, body };
  } catch {
    return { status: 0, body: undefined };
  }
}

export function createLoad(opts: {
  /** The balancer's main URL. */
  url: string;
  did: string;
  nodes: RegisteredNode[];
  /** Concurrent plain writers. */
  writers: number;
  /** Pause of each plain writer between two writes. */
  writePauseMs: number;
  /** Pause of the held writer between two held writes. */
  heldPauseMs: number;
  /** Each node beats this often. */
  beatEveryMs: number;
}): Load {
  const acknowledged = new Map<string, number>();
  const held = new Map<string, HeldWrite>();
  const attempts: Attempt[] = [];
  let counter = 0;
  let stopping = false;
  let closing = false;
  let running: Promise<unknown>[] = [];
  let beating: Promise<unknown>[] | null = null;
  const failures: Error[] = [];

  const write = async (kind: 'write' | 'held'): Promise<void> => {
    const n = counter++;
    const key = `drills.${kind}.${n}`;
    const idempotencyKey = `idem-${kind}-${n}`;
    const giveUpAt = Date.now() + WRITE_GIVE_UP_MS;
    for (;;) {
      const start = Date.now();
      const res = await request('POST', `${opts.url}/api/report/truth`, {
        headers: { 'x-did': opts.did, 'idempotency-key': idempotencyKey },
        body: kind === 'write' ? { key, value: { n } } : { key, value: { n }, truth_type: 'risk' }
      });
      const ok = res.status === (kind === 'write' ? 200 : 202);
      attempts.push({ start, end: Date.now(), what: kind, ok, status: res.status });
      if (ok && kind === 'write') {
        acknowledged.set(key, res.body.seq);
        return;
      }
      if (ok) {
        held.set(idempotencyKey, {
          key,
          approvalId: res.body.approval_id,
          statusUrl: res.body.status_url,
          at: Date.now()
        });
        return;
      }
      if (!RETRYABLE.has(res.status)) throw new Error(`${kind} ${key}: ${res.status} ${JSON.stringify(res.body)}`);
      if (Date.now() > giveUpAt) throw new Error(`${kind} ${key} not acknowledged after ${WRITE_GIVE_UP_MS} ms`);
      await sleep(250);
    }
  };

  const loop = async (
    body: () => Promise<void>,
    pauseMs: number,
    offsetMs = 0,
    until = () => stopping
  ): Promise<void> => {
    await sleep(offsetMs);
    try {
      while (!until()) {
        await body();
        await sleep(pauseMs);
      }
    } catch (err) {
      failures.push(err instanceof Error ? err : new Error(String(err)));
    }
  };

  const beat = (node: RegisteredNode) => async () => {
    const start = Date.now();
    const res = await request('POST', `${opts.url}/a2a/heartbeat`, {
      headers: nodeHeaders(node),
      body: HEARTBEAT_BODY
    });
    attempts.push({ start, end: Date.now(), what: 'heartbeat', ok: res.status === 200, status: res.status });
  };

  return {
    acknowledged,
    held,
    attempts,
    start: () => {
      stopping = false;
      running = [
        ...Array.from({ length: opts.writers }, () => loop(() => write('write'), opts.writePauseMs)),
        loop(() => write('held'), opts.heldPauseMs)
      ];
      // The nodes' beats spread over the interval, as a fleet's are.
      beating ??= opts.nodes.map((node, i) =>
        loop(beat(node), opts.beatEveryMs, Math.floor((i * opts.beatEveryMs) / opts.nodes.length), () => closing)
      );
    },
    stop: async () => {
      stopping = true;
      await Promise.all(running);
      if (failures.length) throw failures[0];
    },
    close: async () => {
      closing = true;
      await Promise.all(beating ?? []);
    }
  };
}

/**
 * What the clients saw from `from` to `to` (attempts by the time they started): per kind, refused of tried, and
 * the end of the last refused one, in seconds after `from` (0: none).
 */
export function refusals(
  attempts: Attempt[],
  from: number,
  to: number
): { text: string; lastRefusalS: number; refused: number; tried: number } {
  const tried = attempts.filter((a) => a.start >= from && a.start < to);
  const failed = tried.filter((a) => !a.ok);
  const label: Record<AttemptKind, string> = { write: 'writes', held: 'held writes', heartbeat: 'heartbeats' };
  const count = (k: AttemptKind) =>
    `${label[k]} ${failed.filter((a) => a.what === k).length}/${tried.filter((a) => a.what === k).length}`;
  const lastRefusalS = failed.length ? (Math.max(...failed.map((a) => a.end)) - from) / 1000 : 0;
  const statuses = [...new Set(failed.map((a) => a.status))].sort((a, b) => a - b);
  return {
    text:
      `refused ${count('write')}, ${count('held')}, ${count('heartbeat')}` +
      (failed.length ? ` (answers ${statuses.join(', ')}); the last ended ${lastRefusalS.toFixed(1)} s in` : ''),
    lastRefusalS,
    refused: failed.length,
    tried: tried.length
  };
}
