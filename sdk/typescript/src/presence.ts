/**
 * Joining the hub and staying alive: registration (or adopting saved credentials), then heartbeats on the hub's
 * schedule with jitter, backing off 1 s, 2 s, 4 s, … (capped) while they fail and waiting as long as `Retry-After`
 * asks on 429/503. The node's state (pending_review, online, offline, rejected) comes from the hub's answers; when
 * no heartbeat got through for the offline window, the node knows the hub judges it offline and says so.
 */
import { loadCredentials, saveCredentials, type NodeCredentials } from './credentials';
import { Backoff, HubError, HubHttp, isTransient, NetworkError, retryAfterMs, sleep } from './http';
import type { Logger } from './logger';

export type NodeState = 'unknown' | 'pending_review' | 'online' | 'offline' | 'rejected';

export interface Registration {
  name: string;
  /** Default `{ code: 'custom' }`. */
  brand?: { code?: string; model_base?: string };
  instance?: { os?: string; cpu?: string; memory_gb?: number; gpu?: string };
  capabilities?: { declared?: string[] };
  /**
   * A DID registered and active on the hub and linked to no node: the hub links it to this node at registration,
   * so that X-DID alone authenticates as the node (docs/federation.md). A DID it cannot link fails the registration
   * (400, 409), which is not retried.
   */
  did?: string;
}

/** A heartbeat's figures (docs/federation.md, Heartbeat); unknown members are kept by the hub as extras. */
export interface HeartbeatReport {
  resources?: Record<string, number | string | boolean | null>;
  performance?: Record<string, number | string | boolean | null>;
  extra?: Record<string, number | string | boolean | null>;
}

export interface PresenceOptions {
  http: HubHttp;
  credentialsFile: string;
  /** Registers with these when there are no saved credentials. */
  register?: Registration;
  /** Credentials issued earlier (e.g. by the join page): saved to the file and used. */
  credentials?: Omit<NodeCredentials, 'hub_url'>;
  /** Default: the hub's recommended interval (30 s). */
  heartbeatIntervalMs?: number;
  /** Default: the hub's offline window (90 s). */
  offlineAfterMs?: number;
  /** Longest wait between failed attempts (default 30 s; a longer `Retry-After` still wins). */
  maxBackoffMs?: number;
  /** The figures each heartbeat reports. */
  report?: () => HeartbeatReport | Promise<HeartbeatReport>;
  log: Logger;
  onState(state: NodeState, previous: NodeState): void;
  onHeartbeat(answer: { state: NodeState; received_at: string }): void;
  onError(err: Error): void;
}

export class Presence {
  private state: NodeState = 'unknown';
  private credentials: NodeCredentials | null = null;
  private intervalMs: number;
  private offlineAfterMs: number;
  private lastBeatOk = 0;
  readonly backoff: Backoff;

  constructor(private readonly options: PresenceOptions) {
    this.intervalMs = options.heartbeatIntervalMs ?? 30_000;
    this.offlineAfterMs = options.offlineAfterMs ?? 90_000;
    this.backoff = new Backoff(1000, options.maxBackoffMs ?? 30_000);
  }

  get current(): NodeState {
    return this.state;
  }

  get nodeId(): string | undefined {
    return this.credentials?.node_id;
  }

  /** Headers proving the node's identity (hold the key: never log them). */
  authHeaders(): Record<string, string> {
    if (!this.credentials) throw new Error('the node has not joined');
    return { 'x-external-node': this.credentials.node_id, 'x-external-key': this.credentials.api_key };
  }

  /** Loads, adopts or registers the node's credentials; retries registration while the hub is busy or down. */
  async join(signal: AbortSignal): Promise<{ node_id: string; registered: boolean }> {
    const { http, credentialsFile, log } = this.options;
    const saved = loadCredentials(credentialsFile);
    if (saved) {
      if (saved.hub_url !== http.baseUrl)
        throw new Error(`${credentialsFile} holds credentials of ${saved.hub_url}, not of ${http.baseUrl}`);
      this.credentials = saved;
      log.info('node credentials loaded', { node_id: saved.node_id });
      return { node_id: saved.node_id, registered: false };
    }
    if (this.options.credentials) {
      this.credentials = { ...this.options.credentials, hub_url: http.baseUrl };
      saveCredentials(credentialsFile, this.credentials);
      log.info('node credentials adopted', { node_id: this.credentials.node_id });
      return { node_id: this.credentials.node_id, registered: false };
    }
    if (!this.options.register) throw new Error(`no credentials in ${credentialsFile} and nothing to register with`);
    const backoff = new Backoff(1000, this.options.maxBackoffMs ?? 30_000);
    for (;;) {
      if (signal.aborted) throw new Error('stopped before the node registered');
      let wait: number;
      try {
        // The hub requires a brand object; `custom` is its default code.
        const body = { ...this.options.register, brand: this.options.register.brand ?? { code: 'custom' } };
        const res = await http.request('POST', '/a2a/register', { body, signal });
        if (res.status === 201) {
          const b = res.body;
          this.credentials = {
            hub_url: http.baseUrl,
            node_id: b.node_id,
            api_key: b.api_key,
            registered_at: new Date().toISOString()
          };
          saveCredentials(credentialsFile, this.credentials);
          if (this.options.heartbeatIntervalMs === undefined && b.heartbeat?.recommended_interval_s > 0)
            this.intervalMs = b.heartbeat.recommended_interval_s * 1000;
          if (this.options.offlineAfterMs === undefined && b.heartbeat?.offline_after_s > 0)
            this.offlineAfterMs = b.heartbeat.offline_after_s * 1000;
          log.info('node registered', { node_id: b.node_id, state: b.state });
          this.setState(b.state);
          return { node_id: b.node_id, registered: true };
        }
        if (!isTransient(res.status))
          throw new HubError(res.status, `registration refused: ${res.status} ${res.body?.message ?? ''}`, res.body);
        wait = backoff.next(retryAfterMs(res.headers));
        log.warn('registration deferred', { status: res.status, retry_in_ms: Math.round(wait) });
      } catch (err) {
        if (!(err instanceof NetworkError)) throw err;
        wait = backoff.next();
        log.warn('registration failed to reach the hub', { error: err.message, retry_in_ms: Math.round(wait) });
      }
      await sleep(wait, signal);
    }
  }

  /** Beats until `signal` aborts or the node is rejected. */
  async run(signal: AbortSignal): Promise<void> {
    const { log } = this.options;
    this.lastBeatOk = Date.now();
    while (!signal.aborted) {
      const wait = await this.beat(signal);
      if (this.state === 'rejected') {
        log.warn('the node was rejected: heartbeats stop');
        return;
      }
      if (this.state === 'online' && Date.now() - this.lastBeatOk > this.offlineAfterMs) this.setState('offline');
      await sleep(wait, signal);
    }
  }

  /** One heartbeat; answers how long to wait before the next. */
  private async beat(signal: AbortSignal): Promise<number> {
    const { http, log } = this.options;
    try {
      const body = (await this.options.report?.()) ?? {};
      const res = await http.request('POST', '/a2a/heartbeat', { body, headers: this.authHeaders(), signal });
      if (res.status === 200) {
        this.backoff.reset();
        this.lastBeatOk = Date.now();
        this.setState(res.body.state);
        this.options.onHeartbeat({ state: res.body.state, received_at: res.body.received_at });
        if (Array.isArray(res.body.ignored_fields) && res.body.ignored_fields.length > 0)
          log.warn('the hub ignored heartbeat fields', { fields: res.body.ignored_fields });
        return this.intervalMs * (0.9 + 0.2 * Math.random());
      }
      if (res.status === 403) {
        this.setState('rejected');
        this.options.onError(new HubError(403, `heartbeat refused: ${res.body?.message ?? 'forbidden'}`, res.body));
        return 0;
      }
      const wait = this.backoff.next(retryAfterMs(res.headers));
      if (!isTransient(res.status))
        this.options.onError(
          new HubError(res.status, `heartbeat refused: ${res.body?.message ?? res.status}`, res.body)
        );
      log.warn('heartbeat not accepted', { status: res.status, retry_in_ms: Math.round(wait) });
      return wait;
    } catch (err) {
      if (signal.aborted) return 0;
      const wait = this.backoff.next();
      log.warn('heartbeat failed to reach the hub', { error: (err as Error).message, retry_in_ms: Math.round(wait) });
      return wait;
    }
  }

  private setState(next: NodeState): void {
    if (typeof next !== 'string' || next === this.state) return;
    const previous = this.state;
    this.state = next;
    this.options.log.info('node state', { state: next, previous });
    this.options.onState(next, previous);
  }
}
