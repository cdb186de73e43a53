/**
 * A process's part in the ledger writer lease, on when LEDGER_FORWARD_SECRET is set
 * (docs/ledger.md#one-writer-across-hosts-the-writer-lease;
^ * lease.ts): the process that appends for its host (a single API process, or the cluster primary with
 * API_PROCESSES > 1) may hold it; the worker only forwards to the holder (it has no listener to be reached at).
 */
import os from 'node:os';
import type { Db } from 'mongodb';
import type { Logger } from 'pino';
import type { Config } from '../../../core/config.node';
import type { ForwardAppend, ForwardCountedAppend } from '../append';
import type { DailyQuota } from '../daily-quota';
import { forwardToWriter } from './lease-holder-client';
import { LedgerWriterLease } from './lease';

/** The longest a stopping holder keeps answering after giving the lease up (see release). */
const RELEASE_WAIT_MAX_MS = 3000;

export interface WriterLeaseMember {
  /** To the holder when another replica holds the lease, else null (append here): the lease-holder transport. */
  forward: ForwardAppend;
  /** A truth write's slot and append, both by the holder when that is another replica (the lease-holder transport). */
  forwardCounted: ForwardCountedAppend;
  /** The host's quota counter, its claims made by the holder when that is another replica. */
  quota(local: DailyQuota): DailyQuota;
  /** What GET /health shows of the lease, as this process knows it. */
  lease(): { holds: boolean; writer_url: string | null };
  /**
   * Before the listeners close: gives the lease up and, if this process held it, keeps answering (421: not the
   * writer; a cluster primary's API processes, which do not know, keep taking forwards for it) for one renewal
   * period (at most 3 s), the time the others take to learn it and stop forwarding here (a forwarded request that
   * meets a closing connection has an unknown outcome: 503 to its caller).
   */
  release(): Promise<void>;
  /** Whether release() was called: the internal routes then answer 421 (api/routes/ledger/writer.ts). */
  released(): boolean;
  /** Gives the lease up (if still held) and closes the forwarding connections. */
  close(): Promise<void>;
}

/**
 * Forwarded appends as one process counts them (GET /health on the main listener): sent to the holder and answered
 * by it, and served as the holder (POST /internal/ledger/appends and counted-appends).
 */
export class ForwardingCounts {
  sent = 0;
  /** The requests `sent` took (a batch of counted appends is one). */
  requests = 0;
  served = 0;
}

/** Takes part in the writer lease, or null when LEDGER_FORWARD_SECRET is not set. */
export async function joinWriterLease(
  db: Db,
  config: Config,
  logger: Logger,
  options: { counts?: ForwardingCounts; mayHold?: boolean } = {}
): Promise<WriterLeaseMember | null> {
  const secret = config.LEDGER_FORWARD_SECRET;
  if (!secret) return null;
  const counts = options.counts ?? new ForwardingCounts();
  const url =
    options.mayHold === false
      ? null
      : (config.LEDGER_WRITER_URL ?? `http://${advertisedHost(config.HOST)}:${config.PORT}`);
  const lease = new LedgerWriterLease(db, {
    url,
    ttlMs: config.LEDGER_WRITER_LEASE_S * 1000,
    onError: (err) => logger.warn({ err }, 'ledger writer lease: the database did not answer')
  });
  await lease.start();
  const { forward, forwardCounted, quota, close } = forwardToWriter(
    lease,
    secret,
    (err) => logger.warn({ err }, 'ledger writer lease: a forwarded write was refused'),
    () => counts.requests++
  );
  logger.info({ url, holds: lease.holds() }, 'ledger writer lease: taking part');
  /** Counts a forwarded append once the holder answered it (not one it never received, then appended here). */
  const answered = <T>(sent: Promise<T> | null): Promise<T> | null =>
    sent &&
    sent.then((result) => {
      counts.sent++;
      return result;
    });
  let released = false;
  const giveUp = () =>
    lease
      .stop()
      .catch((err: unknown) =>
        logger.warn({ err }, 'ledger writer lease could not be given up; another replica takes it when it expires')
      );
  return {
    forward: (input, signal, how) => answered(forward(input, signal, how)),
    forwardCounted: (input, claim, signal, deadline) => answered(forwardCounted(input, claim, signal, deadline)),
    quota,
    lease: () => ({ holds: lease.holds(), writer_url: lease.holds() ? url : lease.writerElsewhere() }),
    release: async () => {
      const held = lease.holds();
      released = true;
      await giveUp();
      // Bounded (a long LEDGER_WRITER_LEASE_S must not outlast the stop's grace): a sender that forwards here
      // later is answered 421 and does it itself, or finds the listener closed (nothing delivered) and does too.
      if (held) await new Promise((r) => setTimeout(r, Math.min(lease.renewMs + 250, RELEASE_WAIT_MAX_MS)));
    },
    released: () => released,
    close: async () => {
      await giveUp();
      await close();
    }
  };
}

/**
 * The address other replicas reach this one at when LEDGER_WRITER_URL is not set: HOST itself, or for a wildcard
 * HOST the first non-internal IPv4 address (a container's or a pod's), else the host name.
 */
export function advertisedHost(host: string): string {
  if (host !== '0.0.0.0' && host !== '::') return host.includes(':') ? `[${host}]` : host;
  for (const addresses of Object.values(os.networkInterfaces())) {
    const v4 = addresses?.find((a) => a.family === 'IPv4' && !a.internal);
    if (v4) return v4.address;
  }
  return os.hostname();
}
