/**
 * The ledger as a stream of events for the hub's WebSocket (GET /v1/ws, api/routes/compute/ws.ts): every ledger
 * entry after a cursor (`ledger`) and/or every node state change after it (`nodes`: the node lifecycle's
 * `hub.node.state_changed` entries). Both follow the ledger, the one source the SSE subscription follows
 * (store/ledger Ledger.after), so every event carries its ledger seq and a reconnecting client resumes from the last
 * seq it saw; appends made by any API process are delivered. A subscriber catches up on its own, then follows one
 * shared tail of the ledger per process (LedgerTail). The socket itself (subscribe message, credentials, close
 * codes) stays with the route; this module sees it only as a sink.
 */
import type { FastifyBaseLogger } from 'fastify';
import { publicEntry, type LedgerEntryDocument } from '../../core/ledger/ledger-entry';
import type { Ledger } from '../../store/ledger/ledger';

/** The ledger key of node state changes (activities/federation/node-lifecycle.ts and node-lifecycle-sweeper.ts). */
export const NODE_STATE_KEY = 'hub.node.state_changed';
export const STREAMS = ['ledger', 'nodes'] as const;
export type Stream = (typeof STREAMS)[number];
export const PUBLIC_STREAMS: ReadonlySet<Stream> = new Set(['ledger']);

const POLL_MS = 500;
const BATCH = 200;
/** Bytes queued to one socket beyond which the hub stops reading the ledger for it until they drain. */
const MAX_BUFFERED_BYTES = 4 * 1024 * 1024;

type Log = Pick<FastifyBaseLogger, 'warn'>;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Where a subscriber's events go: a socket, seen through what the stream needs of it. */
export interface StreamSink {
  closed(): boolean;
  /** Bytes queued and not yet sent (backpressure). */
  buffered(): number;
  send(event: Record<string, unknown>): void;
  onClose(listener: () => void): void;
}

/** A subscriber that has read the ledger up to `cursor` and takes what follows from the shared tail. */
interface LiveReader {
  cursor: number;
  deliver(doc: LedgerEntryDocument): void;
}

/**
 * One reader of the ledger per API process for every subscriber that has caught up: it polls what follows the
 * newest seq it delivered (every POLL_MS, only while some subscriber follows it) and hands each entry to every live
 * subscriber, so the database sees one poll per process, not one per socket. A subscriber joins only when it has
 * read at least as far as the tail (no gap); each skips what it already has (no repeat). One behind it catches up
 * on its own.
 */
class LedgerTail {
  cursor: number | null = null;
  private readonly live = new Set<LiveReader>();
  private running = false;
  constructor(
    private readonly ledger: Ledger,
    private readonly log: Log
  ) {}

  /** Adds a reader that has read up to its cursor; false when the tail is already past it (catch up first). */
  join(reader: LiveReader): boolean {
    if (this.cursor !== null && this.cursor > reader.cursor) return false;
    if (this.cursor === null) this.cursor = reader.cursor;
    this.live.add(reader);
    void this.run();
    return true;
  }

  leave(reader: LiveReader): void {
    this.live.delete(reader);
  }

  private async run(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      while (this.live.size > 0) {
        try {
          const batch = await this.ledger.after(this.cursor!, BATCH);
          for (const doc of batch) {
            this.cursor = doc.seq;
            for (const reader of [...this.live]) reader.deliver(doc);
          }
          if (batch.length === BATCH) continue;
        } catch (err) {
          this.log.warn({ err }, 'websocket ledger tail read failed; retrying');
        }
        await sleep(POLL_MS);
      }
    } finally {
      this.running = false;
      // Nobody follows: the next reader to join sets where reading resumes.
      if (this.live.size === 0) this.cursor = null;
    }
  }
}

/** The events one ledger entry makes on the streams subscribed to. */
function emit(sink: StreamSink, streams: ReadonlySet<Stream>, doc: LedgerEntryDocument): void {
  if (streams.has('ledger')) sink.send({ type: 'entry', seq: doc.seq, entry: publicEntry(doc) });
  if (streams.has('nodes') && doc.key === NODE_STATE_KEY) {
    const v = JSON.parse(doc.value_json) as Record<string, unknown>;
    sink.send({
      type: 'node_state',
      seq: doc.seq,
      node_id: v.node_id,
      from: v.from ?? null,
      to: v.to,
      at: v.at,
      reason: v.reason ?? null,
      actor: v.actor ?? null
    });
  }
}

/** Built once per listener: one shared tail of `ledger`, followed by every subscriber that has caught up. */
export function createLedgerStreams(ledger: Ledger, log: Log) {
  const tail = new LedgerTail(ledger, log);

  /** Sends `sink` every event of `streams` after `after` until it closes. */
  async function follow(streams: ReadonlySet<Stream>, after: number, sink: StreamSink, requestLog: Log) {
    let leftTail: () => void = () => undefined;
    const reader: LiveReader = {
      cursor: after,
      deliver: (doc) => {
        if (sink.closed() || doc.seq <= reader.cursor) return;
        reader.cursor = doc.seq;
        emit(sink, streams, doc);
        // A slow reader leaves the shared tail and catches up on its own once its buffer has drained.
        if (sink.buffered() >= MAX_BUFFERED_BYTES) {
          tail.leave(reader);
          leftTail();
        }
      }
    };
    sink.onClose(() => {
      tail.leave(reader);
      leftTail();
    });
    while (!sink.closed()) {
      if (sink.buffered() >= MAX_BUFFERED_BYTES) {
        await sleep(POLL_MS);
        continue;
      }
      // Catching up on its own: everything after the cursor, in batches.
      try {
        const batch = await ledger.after(reader.cursor, BATCH);
        for (const doc of batch) {
          if (sink.closed()) return;
          reader.cursor = doc.seq;
          emit(sink, streams, doc);
        }
        if (batch.length === BATCH) continue;
      } catch (err) {
        requestLog.warn({ err }, 'websocket ledger read failed; retrying');
        await sleep(POLL_MS);
        continue;
      }
      // Caught up: follow the shared tail, unless it is already past this cursor (then read again on its own).
      if (sink.closed() || !tail.join(reader)) continue;
      await new Promise<void>((resolve) => (leftTail = resolve));
    }
  }

  return { follow };
}
