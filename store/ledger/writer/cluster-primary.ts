/**
 * One ledger writer per host: with API_PROCESSES=N the API processes (cluster workers) hand their appends to the
 * cluster primary over the cluster's IPC channel, and the primary appends them with its own Ledger, group-committed
 * with every other process's. Two processes appending directly race for the next seq: the loser's insert is
 * refused, it waits for the winner's head record and builds its batch again, so N processes wrote well below the
 * rate of one (bench:ledger, 1,000 entries, on FerretDB's former SQLite backend: two processes 0.24-0.52x the
 * throughput of one, p99 1.6-7.4x). Through the primary there is no race among them; the worker process (the hub's
 * own events) and API replicas on other hosts append directly unless they share the writer lease (lease.ts, over
 * HTTP); the unique seq keeps the ledger exact whoever writes.
 *
 * The daily quota's slots likewise (store/ledger/quota.ts): each process leasing a DID's slots on its own, the
 * processes of a host claimed the same slot numbers, refused each other's inserts and looked the counter up again
 * after a few refusals; with many DIDs each written through every process that happened at every block. The API processes forward `consume` and `refund` to the primary, whose one
 * QuotaStore leases for the whole host: its slots are refused only by other hosts.
 *
 * Messages (JSON over the IPC channel; `zh` tells them from the cluster module's own):
 *   process → primary  { zh: 'ledger.append', id, input, direct, deadline }   { zh: 'ledger.withdraw', id }
 *   primary → process  { zh: 'ledger.appended', id, result } { zh: 'ledger.failed', id, withdrawn, message }
 *   process → primary  { zh: 'quota.consume', id, scope, day, limit, direct }   { zh: 'quota.refund', id, scope, day, n, direct }
 *   primary → process  { zh: 'quota.done', id, allowed, count }          { zh: 'quota.failed', id, message }
 * A withdrawal (the caller's deadline passed) withdraws the append if its batch has not begun, exactly as a direct
 * append's signal does (AppendWithdrawn: nothing written, the quota slot given back). When the channel is gone (the
 * primary stopping) an append is made directly: safe, only slower.
 *
 * The API process's side is the `cluster-primary` writer transport (store/ledger/writer/transports.ts).
 */
import { AppError } from '../../../core/errors';
import { AppendInput, AppendOptions, AppendResult, AppendWithdrawn, ForwardAppend } from '../append';
import type { DailyQuota } from '../daily-quota';

/** What the primary appends with: its Ledger (any writer with Ledger.append's contract). */
interface HostWriter {
  append(input: AppendInput, options: AppendOptions): Promise<AppendResult>;
}

type ForwardMessage =
  | { zh: 'ledger.append'; id: number; input: AppendInput; direct?: boolean; deadline?: number | null }
  | { zh: 'ledger.withdraw'; id: number }
  | { zh: 'ledger.appended'; id: number; result: AppendResult }
  | { zh: 'ledger.failed'; id: number; withdrawn: boolean; message: string }
  | { zh: 'quota.consume'; id: number; scope: string; day: string; limit: number; direct?: boolean }
  | { zh: 'quota.refund'; id: number; scope: string; day: string; n: number; direct?: boolean }
  | { zh: 'quota.done'; id: number; allowed: boolean; count: number }
  | { zh: 'quota.failed'; id: number; message: string };

/** The two ends of an IPC channel as Node gives them: `process` in a child, the ChildProcess / cluster Worker in the parent. */
export interface IpcEnd {
  send?(message: unknown): boolean;
  connected?: boolean;
  on(event: 'message', listener: (message: unknown) => void): unknown;
  on(event: 'disconnect', listener: () => void): unknown;
}

function isForwardMessage(message: unknown): message is ForwardMessage {
  if (typeof message !== 'object' || message === null) return false;
  const zh = (message as { zh?: unknown }).zh;
  return typeof zh === 'string' && (zh.startsWith('ledger.') || zh.startsWith('quota.'));
}

/** The primary's side: appends and takes quota for what one API process forwards, with the host's one `ledger` and `quota`. */
export function serveForwardedWrites(
  writers: { ledger: HostWriter; quota: DailyQuota },
  channel: IpcEnd,
  onError: (err: unknown) => void = () => undefined
): void {
  const { ledger, quota } = writers;
  const withdrawals = new Map<number, AbortController>();
  const reply = (message: ForwardMessage) => {
    try {
      if (channel.connected !== false) channel.send?.(message);
    } catch (err) {
      onError(err); // the process went away: its caller is gone with it
    }
  };
  channel.on('message', (message) => {
    if (!isForwardMessage(message)) return;
    if (message.zh === 'ledger.withdraw') {
      withdrawals.get(message.id)?.abort();
      return;
    }
    if (message.zh === 'quota.consume' || message.zh === 'quota.refund') {
      const { id } = message;
      const how = { direct: message.direct ?? false };
      const done =
        message.zh === 'quota.consume'
          ? quota.consume(message.scope, message.day, message.limit, how)
          : quota.refund(message.scope, message.day, message.n, how).then(() => ({ allowed: true, count: message.n }));
      done.then(
        (r) => reply({ zh: 'quota.done', id, allowed: r.allowed, count: r.count }),
        (err: unknown) => {
          onError(err); // the details go to the primary's log, not to the caller
          reply({ zh: 'quota.failed', id, message: 'the database did not answer' });
        }
      );
      return;
    }
    if (message.zh !== 'ledger.append') return;
    const { id, input } = message;
    const controller = new AbortController();
    withdrawals.set(id, controller);
    ledger
      .append(input, {
        signal: controller.signal,
        direct: message.direct ?? false,
        ...(message.deadline ? { deadline: message.deadline } : {})
      })
      .then(
        (result) => reply({ zh: 'ledger.appended', id, result }),
        (err: unknown) => {
          if (!(err instanceof AppendWithdrawn)) onError(err);
          reply({
            zh: 'ledger.failed',
            id,
            withdrawn: err instanceof AppendWithdrawn,
            message: err instanceof Error ? err.message : String(err)
          });
        }
      )
      .finally(() => withdrawals.delete(id));
  });
}

/** A message the primary answers, without its id (the caller gives it one). */
type Request = ForwardMessage extends infer M ? (M extends { id: number } ? Omit<M, 'id'> : never) : never;

/**
 * An API process's side of one kind of request: each request gets an id, its answer settles it (`settle` reads the
 * answers of this kind and ignores the rest), and a channel that closes rejects every request still unanswered
 * with `lost()`. `send` returns null when the channel cannot take the request (the caller then does the work
 * itself).
 */
function requestsOver<T>(
  channel: IpcEnd,
  settle: (answer: ForwardMessage, resolve: (value: T) => void, reject: (err: unknown) => void) => boolean,
  lost: () => Error
) {
  const waiting = new Map<number, { resolve: (value: T) => void; reject: (err: unknown) => void }>();
  let nextId = 1;
  channel.on('message', (message) => {
    if (!isForwardMessage(message)) return;
    const caller = waiting.get(message.id);
    if (caller && settle(message, caller.resolve, caller.reject)) waiting.delete(message.id);
  });
  channel.on('disconnect', () => {
    for (const caller of waiting.values()) caller.reject(lost());
    waiting.clear();
  });
  return (request: Request): { id: number; answer: Promise<T> } | null => {
    if (!channel.send || channel.connected === false) return null;
    const id = nextId++;
    const answer = new Promise<T>((resolve, reject) => waiting.set(id, { resolve, reject }));
    try {
      channel.send({ ...request, id }); // false only means queued by Node
    } catch {
      waiting.delete(id);
      return null;
    }
    return { id, answer };
  };
}

/** An API process's side: forwards appends to the primary at the other end of `channel` (`process` in a cluster worker). */
export function forwardAppendsTo(channel: IpcEnd): ForwardAppend {
  const send = requestsOver<AppendResult>(
    channel,
    (message, resolve, reject) => {
      if (message.zh === 'ledger.appended') resolve(message.result);
      else if (message.zh !== 'ledger.failed') return false;
      else if (message.withdrawn) reject(new AppendWithdrawn());
      // Whatever failed there (the database, most likely) is not the caller's doing; nothing was acknowledged.
      // (The primary logged the details; they are the database's, not for the caller.)
      else
        reject(
          new AppError(
            'unavailable',
            'The ledger could not store the write; retry with the same Idempotency-Key',
            {},
            { 'Retry-After': '5' }
          )
        );
      return true;
    },
    // The primary is going away: whatever it had not answered may or may not have landed, as after a timeout.
    () =>
      new AppError(
        'unavailable',
        'The ledger writer stopped before answering; retry with the same Idempotency-Key',
        {},
        { 'Retry-After': '5' }
      )
  );
  return (input, signal, how) => {
    if (!channel.send || channel.connected === false) return null;
    if (signal?.aborted) return Promise.reject(new AppendWithdrawn());
    const sent = send({ zh: 'ledger.append', input, direct: how.direct, deadline: how.deadline });
    if (!sent) return null;
    signal?.addEventListener(
      'abort',
      () => {
        try {
          channel.send?.({ zh: 'ledger.withdraw', id: sent.id } satisfies ForwardMessage);
        } catch {
          // The channel closed: the answer never comes; the caller's deadline has already answered it.
        }
      },
      { once: true }
    );
    return sent.answer;
  };
}

/**
 * An API process's side of the quota: `consume` and `refund` go to the primary at the other end of `channel`, whose
 * QuotaStore leases for every process of the host. When the channel is gone (the primary stopping; a cluster worker
 * whose primary vanished exits on its own), `local` (this process's own QuotaStore) takes over: exact all the same
 * (slots are unique documents), only racing again.
 */
export function forwardQuotaTo(channel: IpcEnd, local: DailyQuota): DailyQuota {
  const send = requestsOver<{ allowed: boolean; count: number }>(
    channel,
    (message, resolve, reject) => {
      if (message.zh === 'quota.done') resolve({ allowed: message.allowed, count: message.count });
      else if (message.zh === 'quota.failed')
        reject(new AppError('unavailable', 'The quota could not be counted; retry later', {}, { 'Retry-After': '5' }));
      else return false;
      return true;
    },
    // A slot the primary took for a caller whose answer is lost stays spent for the day (as a process dying with a lease).
    () =>
      new AppError('unavailable', 'The quota counter stopped before answering; retry later', {}, { 'Retry-After': '5' })
  );
  return {
    consume: (scope, day, limit, how) =>
      send({ zh: 'quota.consume', scope, day, limit, direct: how?.direct ?? false })?.answer ??
      local.consume(scope, day, limit),
    // Without the primary, local gives it back (a counter it does not hold: the slot's document is deleted).
    refund: async (scope, day, n, how) => {
      await (send({ zh: 'quota.refund', scope, day, n, direct: how?.direct ?? false })?.answer ??
        local.refund(scope, day, n));
    }
  };
}
