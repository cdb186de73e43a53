/**
 * A replica's watch on the lease holder it forwards to (writer/lease-holder-client.ts): a holder cut off from this
 * replica by the network, while it still reaches the database and keeps the lease, is found out in seconds rather
 * than at each forwarded request's deadline.
 *
 * Without it, a request sent on a kept-alive connection to a holder that can no longer be reached waits for an answer
 * until its deadline plus a grace (15 s at the default 5 s write deadline), and the writes queued behind the two
 * requests in flight wait with it: the partition drill (test/topology/api-drills.test.ts) saw most writes through the
 * forwarding replica refused for the whole of a 30 s cut.
 *
 * With it, a request still unanswered after PROBE_AFTER_MS has the holder probed: `GET <url>/health` on a connection of
 * its own (never a kept-alive one). Any answer, whatever its status, means the holder is there and only slow: nothing
 * changes. A probe that cannot connect (refused, unreachable, no connection within PROBE_CONNECT_MS: what a partition
 * looks like from this side) means it is gone from here: the holder is skipped for a lease period (the writes waiting
 * and every new one are appended here, which is exact: nothing relies on the lease for correctness, docs/ledger.md),
 * and the requests on their way to it are given up, their callers answered 503 as after any unanswered request (their
 * outcome is unknown: retry with the Idempotency-Key). A probe that connects but is not answered in time says nothing
 * certain (an overloaded holder), and changes nothing either.
 */
import { Agent, request } from 'undici';
import type { LedgerWriterLease } from './lease';

/** How long a request to the holder may wait for its answer before the holder is probed. */
export const PROBE_AFTER_MS = 1500;
const PROBE_CONNECT_MS = 1000;
const PROBE_ANSWER_MS = 3000;

export class HolderWatch {
  /** A probe opens a connection of its own and closes it (`reset`): one stuck on a dead connection proves nothing. */
  private readonly probes = new Agent({ connect: { timeout: PROBE_CONNECT_MS }, keepAliveTimeout: 1 });
  /** The requests on their way to each holder, to give up when it is found gone. */
  private readonly pending = new Map<string, Set<AbortController>>();
  private readonly probing = new Map<string, Promise<void>>();

  constructor(
    private readonly lease: LedgerWriterLease,
    private readonly isNotDelivered: (err: unknown) => boolean,
    private readonly onError: (err: unknown) => void
  ) {}

  /** Runs `send` (a request to the holder at `url`) with a signal that is aborted if the holder is found gone. */
  async during<T>(url: string, send: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const controller = new AbortController();
    let set = this.pending.get(url);
    if (!set) this.pending.set(url, (set = new Set()));
    set.add(controller);
    const timer = setTimeout(() => void this.probe(url), PROBE_AFTER_MS);
    timer.unref();
    try {
      return await send(controller.signal);
    } finally {
      clearTimeout(timer);
      set.delete(controller);
    }
  }

  async close(): Promise<void> {
    await Promise.all(this.probing.values());
    await this.probes.close();
  }

  private probe(url: string): Promise<void> {
    let running = this.probing.get(url);
    if (!running) {
      running = this.reach(url).finally(() => this.probing.delete(url));
      this.probing.set(url, running);
    }
    return running;
  }

  private async reach(url: string): Promise<void> {
    try {
      const res = await request(`${url}/health`, {
        dispatcher: this.probes,
        reset: true,
        headersTimeout: PROBE_ANSWER_MS,
        bodyTimeout: PROBE_ANSWER_MS
      });
      await res.body.dump();
    } catch (err) {
      if (!this.isNotDelivered(err)) return; // connected, no answer in time: slow, perhaps; nothing certain
      this.lease.skip(url);
      const given = [...(this.pending.get(url) ?? [])];
      this.onError(
        new Error(
          `the ledger writer at ${url} cannot be reached (${String((err as Error).message)}): appending here for a lease period, ${given.length} request(s) on their way given up`
        )
      );
      given.forEach((controller) => controller.abort());
    }
  }
}
