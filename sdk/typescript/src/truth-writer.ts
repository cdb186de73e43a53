/**
 * Sends the outbox's pending writes to `POST /api/report/truth` (X-DID, the write's id as its Idempotency-Key),
 * a few at a time, and follows held writes (202) to their decision. While the hub is down, overloaded (503) or over
 * quota (429) every send waits: 1 s, 2 s, 4 s, … capped, or the `Retry-After` the hub gave when longer. A write the
 * hub refuses for good (400, 413: the write itself is wrong) fails; an identity refused (401, 403) pauses the outbox
 * instead, since the writes are fine and the operator can fix the DID.
 */
import { Backoff, HubError, HubHttp, isTransient, retryAfterMs } from './http';
import type { Logger } from './logger';
import type { OutboxRecord, Outbox } from './outbox';
import { Wake } from './wake';

export interface TruthWriterOptions {
  http: HubHttp;
  outbox: Outbox;
  did: string;
  log: Logger;
  /** Writes in flight at once (default 4). */
  concurrency?: number;
  maxBackoffMs?: number;
  /** How often held writes are looked for in the ledger (default 5 s). */
  heldPollMs?: number;
  onChange(record: OutboxRecord): void;
  onError(err: Error): void;
}

const DECISION_PREFIX = 'hub.truth_approval.';

export class TruthWriter {
  private readonly wake = new Wake();
  private readonly inFlight = new Map<string, Promise<void>>();
  private readonly backoff: Backoff;
  private pausedUntil = 0;
  private lastHeldPoll = 0;
  private identityRefused = false;

  constructor(private readonly options: TruthWriterOptions) {
    this.backoff = new Backoff(1000, options.maxBackoffMs ?? 30_000);
  }

  /** New work: the loop looks at the outbox now. */
  kick(): void {
    this.wake.kick();
  }

  async run(signal: AbortSignal): Promise<void> {
    const { outbox } = this.options;
    const concurrency = this.options.concurrency ?? 4;
    const heldPollMs = this.options.heldPollMs ?? 5000;
    while (!signal.aborted) {
      const now = Date.now();
      let nextWake = 60_000;
      if (now < this.pausedUntil) {
        nextWake = this.pausedUntil - now;
      } else {
        for (const r of outbox.take('pending', concurrency - this.inFlight.size, (id) => this.inFlight.has(id))) {
          const sending = this.send(r, signal)
            .catch((err: Error) => this.options.onError(err)) // e.g. the journal's disk failing
            .finally(() => {
              this.inFlight.delete(r.id);
              this.wake.kick();
            });
          this.inFlight.set(r.id, sending);
        }
      }
      if (outbox.counts().held > 0) {
        const due = this.lastHeldPoll + heldPollMs - Date.now();
        if (due <= 0) {
          await this.followHeld(signal);
          this.lastHeldPoll = Date.now();
          nextWake = Math.min(nextWake, heldPollMs);
        } else nextWake = Math.min(nextWake, due);
      }
      await this.wake.wait(nextWake, signal);
    }
    await Promise.allSettled(this.inFlight.values());
  }

  private async send(r: OutboxRecord, signal: AbortSignal): Promise<void> {
    const { http, outbox, log, did } = this.options;
    outbox.attempted(r.id);
    const body: Record<string, unknown> = { key: r.key, value: r.value };
    if (r.truth_type !== null) body.truth_type = r.truth_type;
    let res;
    try {
      res = await http.request('POST', '/api/report/truth', {
        body,
        headers: { 'x-did': did, 'idempotency-key': r.id },
        signal
      });
    } catch (err) {
      if (signal.aborted) return;
      this.pause(undefined, `truth write failed to reach the hub: ${(err as Error).message}`);
      return;
    }
    if (res.status === 200) {
      this.backoff.reset();
      this.identityRefused = false;
      outbox.acknowledge(r.id, res.body.seq, res.body.event_id);
      this.changed(r.id);
      return;
    }
    if (res.status === 202) {
      this.backoff.reset();
      outbox.hold(r.id, res.body.approval_id, await this.ledgerSize(signal));
      log.info('truth write held for approval', { id: r.id, approval_id: res.body.approval_id });
      this.changed(r.id);
      return;
    }
    if (isTransient(res.status)) {
      this.pause(retryAfterMs(res.headers), `truth write deferred: ${res.status} ${res.body?.error ?? ''}`);
      return;
    }
    if (res.status === 401 || res.status === 403) {
      if (!this.identityRefused)
        this.options.onError(
          new HubError(res.status, `the hub refused the DID for truth writes: ${res.body?.message ?? ''}`, res.body)
        );
      this.identityRefused = true;
      this.pause(undefined, `truth writes paused: DID refused (${res.status})`);
      return;
    }
    outbox.fail(r.id, {
      status: res.status,
      code: res.body?.error,
      message: String(res.body?.message ?? res.text.slice(0, 200))
    });
    log.warn('truth write refused', { id: r.id, status: res.status, code: res.body?.error });
    this.changed(r.id);
  }

  /** Every send waits: the hub asked for it, or could not be reached. */
  private pause(retryAfter: number | undefined, why: string): void {
    const until = Date.now() + this.backoff.next(retryAfter);
    if (until > this.pausedUntil) {
      this.pausedUntil = until;
      this.options.log.warn(why, { retry_in_ms: until - Date.now(), attempt: this.backoff.attempts });
    }
  }

  /** The ledger's size now: a held write's decision is appended after it. */
  private async ledgerSize(signal: AbortSignal): Promise<number | undefined> {
    try {
      const res = await this.options.http.request('GET', '/api/status', { signal });
      return res.status === 200 && Number.isSafeInteger(res.body?.truth_count) ? res.body.truth_count : undefined;
    } catch {
      return undefined;
    }
  }

  /**
   * Looks for the decisions of held writes in the ledger (`hub.truth_approval.<state>` records carry the
   * approval id): public reads, no quota spent, and it sees rejections and expiries as well as approvals.
   */
  private async followHeld(signal: AbortSignal): Promise<void> {
    const { http, outbox, log } = this.options;
    const held = outbox.take('held', Infinity);
    const byApproval = new Map(held.map((r) => [r.approval_id!, r]));
    let after = Math.min(...held.map((r) => r.held_after ?? 0));
    try {
      for (let page = 0; page < 20 && byApproval.size > 0; page++) {
        const res = await http.request('GET', `/api/sub-l0?after=${after}&limit=500`, { signal });
        if (res.status !== 200 || !Array.isArray(res.body?.entries)) return;
        for (const e of res.body.entries) {
          if (e.kind !== 'event' || typeof e.key !== 'string' || !e.key.startsWith(DECISION_PREFIX)) continue;
          const r = byApproval.get(e.value?.approval_id);
          if (!r) continue;
          const state = e.key.slice(DECISION_PREFIX.length);
          if (state === 'approved' && Number.isSafeInteger(e.value.seq))
            outbox.decide(r.id, 'acknowledged', e.value.seq);
          else if (state === 'rejected' || state === 'expired') outbox.decide(r.id, state);
          else continue;
          log.info('held truth write decided', { id: r.id, approval_id: r.approval_id, state });
          byApproval.delete(r.approval_id!);
          this.changed(r.id);
        }
        after = res.body.next_cursor;
        if (res.body.entries.length < 500) break;
      }
      // Where to look next time (journaled only when it moved, so a quiet ledger costs no fsync).
      for (const r of byApproval.values())
        if (Number.isSafeInteger(after) && after > (r.held_after ?? 0)) outbox.hold(r.id, r.approval_id!, after);
    } catch (err) {
      if (!signal.aborted) log.warn('could not follow held writes', { error: (err as Error).message });
    }
  }

  private changed(id: string): void {
    const r = this.options.outbox.get(id);
    if (r) this.options.onChange(r);
  }
}
