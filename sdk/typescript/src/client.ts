/**
 * HubNode: one node of the hub, as an application holds it. `start()` joins (registers or adopts saved
 * credentials), then heartbeats, sends the outbox and verifies what landed, each in its own loop; `write()` only
 * appends to the durable outbox and returns; `stop()` ends every loop and leaves no timer. What happens is told
 * through events: `state`, `heartbeat`, `write` (a write changed state), `verified`, `checkpoint`, `task` (the
 * worker claimed, finished, failed or dropped a task), `error`.
 */
import { EventEmitter } from 'node:events';
import path from 'node:path';
import type { Checkpoint } from './checkpoint';
import { HubError, HubHttp, type Fetch } from './http';
import { silentLogger, type Logger } from './logger';
import { Outbox, type OutboxRecord, type OutboxSync, type TruthInput, type WriteState } from './outbox';
import { Presence, type HeartbeatReport, type NodeState, type Registration } from './presence';
import { TruthWriter } from './truth-writer';
import { LedgerVerifier } from './verifier';
import { TaskWorker, type TaskHandler } from './worker';

export interface HubNodeOptions {
  /** The hub's main listener, e.g. http://localhost:8080. */
  hubUrl: string;
  /** Where the node keeps its credentials (0600), outbox journal and last checkpoint; one directory per node. */
  stateDir: string;
  /** The DID truth writes are made with (X-DID; issued by the hub's operator). Without it write() throws. */
  did?: string;
  /** Register with these when `stateDir` holds no credentials. */
  register?: Registration;
  /** Or adopt credentials issued earlier (the join page shows them once). */
  credentials?: { node_id: string; api_key: string };
  /** Join and heartbeat (default true); false runs the outbox and the verifier only. */
  heartbeat?: boolean;
  heartbeatIntervalMs?: number;
  offlineAfterMs?: number;
  report?: () => HeartbeatReport | Promise<HeartbeatReport>;
  /** The checkpoint verifier key to pin (`GET /tlog/verifier-key`, given out of band). */
  verifierKey?: string;
  /**
   * The hub's witnesses to require (their cosignature keys, `GET /tlog/witness-key` of each, given out of band), and
   * how many must cosign a checkpoint before it proves anything (default: all).
   */
  witnesses?: string[];
  witnessQuorum?: number;
  /** Claim and run tasks matching the node's declared capabilities (docs/a2a.md, work distribution). */
  worker?: { handler: TaskHandler; maxTasks?: number; pollMs?: number };
  /** Prove acknowledged writes (default true). */
  verify?: boolean;
  verifyIntervalMs?: number;
  /**
   * Keep acknowledged writes in the outbox until proven (default: when verifying). A process that does not verify
   * but shares the state dir with one that does (the CLI's commands) sets it, or its compaction drops them.
   */
  keepUnverified?: boolean;
  concurrency?: number;
  maxBackoffMs?: number;
  heldPollMs?: number;
  requestTimeoutMs?: number;
  /**
   * When the outbox's lines reach the disk (outbox.ts): 'group' (default) syncs them off the caller's path, 'each'
   * inside each write() (which then waits for the disk), 'none' never. A write() that returned survives a crash of
   * the process in every case; 'group' loses at most the last fdatasync's lines to a crash of the machine.
   */
  sync?: OutboxSync;
  logger?: Logger;
  fetch?: Fetch;
}

/** How a write ended: appended (with its seq), or a held write's decision. */
export type WriteOutcome =
  | { state: 'acknowledged'; id: string; seq: number; event_id?: string }
  | { state: 'rejected' | 'expired'; id: string; approval_id?: string };

export interface WriteHandle {
  /** The write's id, also its Idempotency-Key. */
  id: string;
  /** Settles once the hub acknowledged the write or decided it; rejects if the hub refused it for good. */
  done: Promise<WriteOutcome>;
  /** Its state in the outbox now. */
  state(): WriteState | undefined;
}

/** A work order of the node's queue (`GET /api/instructions/<node_id>`). */
export interface Instruction {
  instruction_id: string;
  key: string;
  /** The order itself, as its issuer wrote it. */
  value: unknown;
  created_at: string;
  /** Null until the node acknowledges it. */
  acked_at: string | null;
}

/** The hub's answer to an acknowledgement (`inbox_ack`). */
export interface InstructionAck {
  instruction_id: string;
  node_id: string;
  acked_at: string;
  /** True when the order had been acknowledged before (nothing changed). */
  already_acked: boolean;
  /** The ledger entry recording the acknowledgement, when the hub wrote one. */
  ledger_seq: number | null;
}

const KEY = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_:+-]+)+$/;

export class HubNode extends EventEmitter {
  readonly http: HubHttp;
  readonly outbox: Outbox;
  private readonly log: Logger;
  private readonly presence: Presence;
  private readonly writer: TruthWriter | undefined;
  private readonly verifier: LedgerVerifier | undefined;
  private readonly worker: TaskWorker | undefined;
  private readonly waiting = new Map<string, { resolve(o: WriteOutcome): void; reject(e: Error): void }>();
  private readonly controller = new AbortController();
  private readonly loops: Promise<void>[] = [];
  private started = false;

  constructor(private readonly options: HubNodeOptions) {
    super();
    this.log = options.logger ?? silentLogger;
    this.http = new HubHttp({ baseUrl: options.hubUrl, fetch: options.fetch, timeoutMs: options.requestTimeoutMs });
    const verify = options.verify !== false && options.did !== undefined;
    this.outbox = new Outbox(path.join(options.stateDir, 'outbox.jsonl'), {
      sync: options.sync,
      keepUntilVerified: options.keepUnverified ?? verify
    });
    this.presence = new Presence({
      http: this.http,
      credentialsFile: path.join(options.stateDir, 'credentials.json'),
      register: options.register,
      credentials: options.credentials,
      heartbeatIntervalMs: options.heartbeatIntervalMs,
      offlineAfterMs: options.offlineAfterMs,
      maxBackoffMs: options.maxBackoffMs,
      report: options.report,
      log: this.log,
      onState: (state, previous) => {
        if (state === 'online') this.worker?.kick(); // claim now, not at the next poll
        this.emit('state', state, previous);
      },
      onHeartbeat: (answer) => this.emit('heartbeat', answer),
      onError: (err) => this.fail(err)
    });
    if (options.did) {
      this.writer = new TruthWriter({
        http: this.http,
        outbox: this.outbox,
        did: options.did,
        log: this.log,
        concurrency: options.concurrency,
        maxBackoffMs: options.maxBackoffMs,
        heldPollMs: options.heldPollMs,
        onChange: (r) => this.settle(r),
        onError: (err) => this.fail(err)
      });
    }
    if (options.worker) {
      this.worker = new TaskWorker({
        http: this.http,
        authHeaders: () => this.presence.authHeaders(),
        handler: options.worker.handler,
        maxTasks: options.worker.maxTasks,
        pollMs: options.worker.pollMs,
        maxBackoffMs: options.maxBackoffMs,
        log: this.log,
        onTask: (event) => this.emit('task', event)
      });
    }
    if (verify) {
      this.verifier = new LedgerVerifier({
        http: this.http,
        outbox: this.outbox,
        did: options.did!,
        verifierKey: options.verifierKey,
        witnesses: options.witnesses,
        witnessQuorum: options.witnessQuorum,
        keyFile: path.join(options.stateDir, 'verifier-key'),
        checkpointFile: path.join(options.stateDir, 'checkpoint'),
        intervalMs: options.verifyIntervalMs,
        log: this.log,
        onVerified: (r, cp) => this.emit('verified', r, cp),
        onCheckpoint: (cp) => this.emit('checkpoint', cp),
        onError: (err) => this.fail(err)
      });
    }
  }

  /** Joins (unless `heartbeat: false`) and starts the loops; resolves once the node has its credentials. */
  async start(): Promise<this> {
    if (this.started) return this;
    this.started = true;
    const signal = this.controller.signal;
    // A loop that ends with an error (an event listener that threw, a disk failing) reports it and stops.
    const loop = (run: Promise<void>) => this.loops.push(run.catch((err: Error) => this.fail(err)));
    if (this.options.heartbeat !== false) {
      await this.presence.join(signal);
      loop(this.presence.run(signal));
      if (this.worker) loop(this.worker.run(signal));
    } else if (this.worker) throw new Error('the worker needs the node to join (heartbeat: true)');
    if (this.writer) loop(this.writer.run(signal));
    if (this.verifier) loop(this.verifier.run(signal));
    return this;
  }

  /** Stops every loop (in-flight requests are aborted) and closes the outbox; pending writes wait for next start. */
  async stop(): Promise<void> {
    this.controller.abort();
    await Promise.allSettled(this.loops);
    this.outbox.close();
    for (const [id, w] of this.waiting) w.reject(new Error(`the node stopped before write ${id} settled`));
    this.waiting.clear();
  }

  get state(): NodeState {
    return this.presence.current;
  }

  get nodeId(): string | undefined {
    return this.presence.nodeId;
  }

  /**
   * Records a truth: appends it to the outbox and returns; no network I/O happens in this call, and (with the
   * default `sync: 'group'`) no wait for the disk either: `flush()` waits for that. The returned handle's `done`
   * settles when the hub acknowledged or decided it.
   */
  write(input: TruthInput): WriteHandle {
    if (!this.writer) throw new Error('no DID given: truth writes need one (HubNodeOptions.did)');
    // The hub's key rules (docs/ledger.md, Writing), checked here so a bad key fails the call, not the outbox.
    const key = input.key;
    if (typeof key !== 'string' || key.length > 256 || !KEY.test(key) || /^truth-/i.test(key) || /^hub\./.test(key))
      throw new TypeError(
        "a truth key is <namespace>.<key>: dot-separated segments of letters, digits, _ - : +, at most 256 characters, not starting with 'truth-' or 'hub.'"
      );
    if (typeof input.value !== 'object' || input.value === null || Array.isArray(input.value))
      throw new TypeError('a truth value is a JSON object');
    const record = this.outbox.enqueue(input);
    const done = this.track(record.id);
    if (this.started) this.writer.kick();
    return { id: record.id, done, state: () => this.outbox.get(record.id)?.state };
  }

  /** Resolves once every write() made so far is on the disk (it survives a crash of the machine, not only of the node). */
  flush(): Promise<void> {
    return this.outbox.flush();
  }

  /** The outbox's writes (pending, held, acknowledged and not yet verified, …), oldest first. */
  writes(): OutboxRecord[] {
    return this.outbox.list();
  }

  /** Proves now what the current checkpoint covers (also done in the background). */
  async verifyNow(): Promise<{ checkpoint: Checkpoint; proven: number }> {
    if (!this.verifier) throw new Error('verification is off (no DID, or verify: false)');
    return this.verifier.round(this.controller.signal);
  }

  /** Step 3 of the onboarding: the hub's status (ledger size, root, signed tree head). */
  async status(): Promise<any> {
    const res = await this.http.request('GET', '/api/status', { signal: this.controller.signal });
    if (res.status !== 200) throw new HubError(res.status, `GET /api/status answered ${res.status}`, res.body);
    return res.body;
  }

  /** Step 3 of the onboarding: the node's instruction queue (X-DID). */
  async instructions(options: { includeAcked?: boolean } = {}): Promise<Instruction[]> {
    if (!this.options.did || !this.nodeId) throw new Error('instructions need a DID and a joined node');
    const q = options.includeAcked ? '?include_acked=true' : '';
    const res = await this.http.request('GET', `/api/instructions/${encodeURIComponent(this.nodeId)}${q}`, {
      headers: { 'x-did': this.options.did },
      signal: this.controller.signal
    });
    if (res.status !== 200)
      throw new HubError(res.status, `instructions: ${res.body?.message ?? res.status}`, res.body);
    return res.body.instructions;
  }

  /**
   * Acknowledges a work order of the node's queue (`inbox_ack` on `POST /dal/deploy`, X-DID: the DID must be linked
   * to the node). Answers the hub's record of it; `already_acked: true` when it was acknowledged before.
   */
  async ackInstruction(instructionId: string): Promise<InstructionAck> {
    if (!this.options.did) throw new Error('acknowledging instructions needs a DID');
    const res = await this.http.request('POST', '/dal/deploy', {
      body: { action: 'inbox_ack', id: instructionId },
      headers: { 'x-did': this.options.did },
      signal: this.controller.signal
    });
    if (res.status !== 200) throw new HubError(res.status, `inbox_ack: ${res.body?.message ?? res.status}`, res.body);
    return res.body;
  }

  private track(id: string): Promise<WriteOutcome> {
    const done = new Promise<WriteOutcome>((resolve, reject) => this.waiting.set(id, { resolve, reject }));
    // An application that never awaits a write must not get an unhandled rejection for it.
    done.catch(() => undefined);
    return done;
  }

  private settle(r: OutboxRecord): void {
    this.emit('write', r);
    const w = this.waiting.get(r.id);
    if (r.state === 'held' || r.state === 'pending') return;
    if (r.state === 'acknowledged') {
      this.verifier?.kick();
      w?.resolve({ state: 'acknowledged', id: r.id, seq: r.seq!, event_id: r.event_id });
    } else if (r.state === 'rejected' || r.state === 'expired') {
      w?.resolve({ state: r.state, id: r.id, approval_id: r.approval_id });
    } else {
      w?.reject(new HubError(r.error?.status ?? 0, `truth write ${r.id} refused: ${r.error?.message ?? ''}`));
    }
    this.waiting.delete(r.id);
  }

  /** Errors go to `error` listeners; with none they are logged, never thrown from a timer. */
  private fail(err: Error): void {
    if (this.listenerCount('error') > 0) this.emit('error', err);
    else this.log.error(err.message, { name: err.name });
  }
}
