/**
 * One ledger writer across hosts: the writer lease (LEDGER_FORWARD_SECRET,
 * docs/ledger.md#one-writer-across-hosts-the-writer-lease).
 *
 * API replicas that are not one cluster (several hosts or containers behind a load balancer) and the worker append
 * to one ledger, and two writers race for its next seq: the loser's insert is refused and it starts again from the
 * winner's head record. The ledger stays exact (the seq is unique), but two racing replicas wrote at 0.1-0.4x the
 * rate of one (bench:ledger, concurrency 16 and 64; its quota slots racing too). With the lease,
 * one replica appends and the others (and the worker) forward their appends to it over HTTP (POST
 * /internal/ledger/appends, api/routes/ledger/writer.ts), where they are group-committed with its own, and take
 * their daily-quota slots from it a block at a time: the processes of one host already do this with their cluster
 * primary (writer/cluster-primary.ts).
 *
 * The lease is one document in `ledger_writer`: { holder, url, expires_at }. Every LEDGER_WRITER_LEASE_S / 3 a
 * replica with a URL takes it if it is free or expired, renews it if it is its own, and otherwise learns who holds
 * it; a replica stopping gives it up, so another takes it at its next renewal instead of at the expiry. Expiries are
 * compared on each replica's own clock and a conditional update is not atomic on every backend (FerretDB reads
 * then writes), so two replicas may each believe they hold it for a moment: they then both append, which is the
 * race above, exact and only slower, until the next renewal settles it. The lease only decides where appends go;
 * nothing relies on it for correctness.
 *
 * A replica forwards only while the holder answers: a holder whose request failed on the way (refused, not
 * resolved, no connection within 2 s, reset, no answer in time), that refused the secret, or that gave the lease up
 * is skipped for one lease period. Where nothing reached it the write is appended here at once (nothing can land
 * twice); a request sent and left unanswered is 503 to its caller (writer/lease-holder-client.ts).
 */
import { randomBytes } from 'node:crypto';
import type { Collection, Db } from 'mongodb';
import { isDuplicateKey } from '../../mongo';

export const LEDGER_WRITER_COLLECTION = 'ledger_writer';
const LEASE_ID = 'writer';

interface WriterLeaseDocument {
  _id: typeof LEASE_ID;
  /** The holding process's random id (a restarted process is a new holder). */
  holder: string;
  /** Where the holder takes forwarded appends: its main listener. */
  url: string;
  /** Milliseconds since the epoch, on the holder's clock. */
  expires_at: number;
}

export interface WriterLeaseOptions {
  /** This process's main listener as the other replicas reach it; null: this process never holds the lease. */
  url: string | null;
  ttlMs: number;
  onError: (err: unknown) => void;
}

export class LedgerWriterLease {
  readonly holderId = randomBytes(8).toString('hex');
  private readonly leases: Collection<WriterLeaseDocument>;
  private current: WriterLeaseDocument | null = null;
  private readonly skipped = new Map<string, number>();
  private timer: NodeJS.Timeout | null = null;
  private ticking: Promise<void> | null = null;

  constructor(
    db: Db,
    private readonly options: WriterLeaseOptions
  ) {
    this.leases = db.collection<WriterLeaseDocument>(LEDGER_WRITER_COLLECTION);
  }

  /** How often the lease is renewed or read again: what another replica takes to learn that it changed hands. */
  get renewMs(): number {
    return Math.max(500, Math.floor(this.options.ttlMs / 3));
  }

  /** Takes or learns the lease now, then again every renewMs. */
  async start(): Promise<void> {
    await this.tick();
    this.timer = setInterval(() => void this.tick(), this.renewMs);
    this.timer.unref();
  }

  /** Gives the lease up if this process holds it (another replica takes it at its next renewal); idempotent. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.ticking;
    if (this.current?.holder !== this.holderId) return;
    this.current = null;
    await this.leases.updateOne({ _id: LEASE_ID, holder: this.holderId }, { $set: { expires_at: 0 } });
  }

  /** Whether this process holds the lease as far as it knows. */
  holds(): boolean {
    return this.current !== null && this.current.holder === this.holderId && this.current.expires_at > Date.now();
  }

  /** Where to forward an append: the holder's URL while another process holds the lease and answers; null: append here. */
  writerElsewhere(): string | null {
    const lease = this.current;
    const now = Date.now();
    if (!lease || lease.holder === this.holderId || lease.expires_at <= now) return null;
    return (this.skipped.get(lease.url) ?? 0) > now ? null : lease.url;
  }

  /** The holder at `url` could not be reached: append here for one lease period. */
  skip(url: string): void {
    this.skipped.set(url, Date.now() + this.options.ttlMs);
  }

  private tick(): Promise<void> {
    this.ticking ??= this.claim()
      .catch((err: unknown) => this.options.onError(err)) // the last lease known stands until it expires
      .finally(() => (this.ticking = null));
    return this.ticking;
  }

  private async claim(): Promise<void> {
    const { url, ttlMs } = this.options;
    const found = await this.leases.findOne({ _id: LEASE_ID });
    const now = Date.now();
    if (!url) {
      this.current = found;
      return;
    }
    const mine: WriterLeaseDocument = { _id: LEASE_ID, holder: this.holderId, url, expires_at: now + ttlMs };
    if (!found) {
      try {
        await this.leases.insertOne(mine);
        this.current = mine;
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
        this.current = await this.leases.findOne({ _id: LEASE_ID }); // another replica took it first
      }
      return;
    }
    if (found.holder !== this.holderId && found.expires_at > now) {
      this.current = found;
      return;
    }
    // Renew ours, or take an expired one: only if it is still what was read.
    const taken = await this.leases.updateOne(
      { _id: LEASE_ID, holder: found.holder, expires_at: found.expires_at },
      { $set: { holder: mine.holder, url, expires_at: mine.expires_at } }
    );
    this.current = taken.matchedCount === 1 ? mine : await this.leases.findOne({ _id: LEASE_ID });
  }
}
