/**
 * One ledger writer per host: with API_PROCESSES=N the API processes (cluster workers) hand their appends to the
 * cluster primary over the cluster's IPC channel, and the primary appends them with its own Ledger, group-committed
 * with every other process's. Two processes appending directly race for the next seq: the loser's insert is
 * refused, it waits for the winner's head record and builds its batch again, so N processes wrote well below the
 * rate of one (bench:ledger, SQLite, 1,000 entries: two processes 0.24-0.52x the throughput of one, p99 1.6-7.4x).
 * Through the primary there is no race among them; the worker process (the hub's own events) and API replicas on
 * other hosts still append directly, and the unique seq keeps the ledger exact whoever writes.
 *
 * Messages (JSON over the IPC channel; `zh` tells them from the cluster module's own):
 *   process → primary  { zh: 'ledger.append', id, input }   { zh: 'ledger.withdraw', id }
 *   primary → process  { zh: 'ledger.appended', id, result } { zh: 'ledger.failed', id, withdrawn, message }
 * A withdrawal (the caller's deadline passed) withdraws the append if its batch has not begun, exactly as a direct
 * append's signal does (AppendWithdrawn: nothing written, the quota slot given back). When the channel is gone (the
 * primary stopping) an append is made directly: safe, only slower.
 */
import { AppError } from '../../core/errors';
import type { AppendInput, AppendResult, Ledger } from './ledger';
import { AppendWithdrawn } from './ledger';

/** Appends on the caller's behalf somewhere else; `null` when it cannot (the caller then appends itself). */
export type ForwardAppend = (input: AppendInput, signal: AbortSignal | undefined) => Promise<AppendResult> | null;

type ForwardMessage =
  | { zh: 'ledger.append'; id: number; input: AppendInput }
  | { zh: 'ledger.withdraw'; id: number }
  | { zh: 'ledger.appended'; id: number; result: AppendResult }
  | { zh: 'ledger.failed'; id: number; withdrawn: boolean; message: string };

/** The two ends of an IPC channel as Node gives them: `process` in a child, the ChildProcess / cluster Worker in the parent. */
export interface IpcEnd {
  send?(message: unknown): boolean;
  connected?: boolean;
  on(event: 'message', listener: (message: unknown) => void): unknown;
  on(event: 'disconnect', listener: () => void): unknown;
}

function isForwardMessage(message: unknown): message is ForwardMessage {
  return typeof message === 'object' && message !== null && typeof (message as { zh?: unknown }).zh === 'string' && (message as { zh: string }).zh.startsWith('ledger.');
}

/** The primary's side: appends what one API process forwards, with `ledger` (this process's only writer). */
export function serveForwardedAppends(ledger: Ledger, channel: IpcEnd, onError: (err: unknown) => void = () => undefined): void {
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
    if (message.zh !== 'ledger.append') return;
    const { id, input } = message;
    const controller = new AbortController();
    withdrawals.set(id, controller);
    ledger
      .append(input, { signal: controller.signal })
      .then(
        (result) => reply({ zh: 'ledger.appended', id, result }),
        (err: unknown) => {
          if (!(err instanceof AppendWithdrawn)) onError(err);
          reply({ zh: 'ledger.failed', id, withdrawn: err instanceof AppendWithdrawn, message: err instanceof Error ? err.message : String(err) });
        }
      )
      .finally(() => withdrawals.delete(id));
  });
}

/** An API process's side: forwards appends to the primary at the other end of `channel` (`process` in a cluster worker). */
export function forwardAppendsTo(channel: IpcEnd): ForwardAppend {
  const waiting = new Map<number, { resolve: (r: AppendResult) => void; reject: (e: unknown) => void }>();
  let nextId = 1;
  channel.on('message', (message) => {
    if (!isForwardMessage(message)) return;
    if (message.zh !== 'ledger.appended' && message.zh !== 'ledger.failed') return;
    const caller = waiting.get(message.id);
    if (!caller) return;
    waiting.delete(message.id);
    if (message.zh === 'ledger.appended') caller.resolve(message.result);
    else if (message.withdrawn) caller.reject(new AppendWithdrawn());
    // Whatever failed there (the database, most likely) is not the caller's doing; nothing was acknowledged.
    else caller.reject(new AppError('unavailable', `The ledger could not store the write (${message.message}); retry with the same Idempotency-Key`, {}, { 'Retry-After': '5' }));
  });
  // The primary is going away: whatever it had not answered may or may not have landed, as after a timeout.
  channel.on('disconnect', () => {
    for (const caller of waiting.values()) caller.reject(new AppError('unavailable', 'The ledger writer stopped before answering; retry with the same Idempotency-Key', {}, { 'Retry-After': '5' }));
    waiting.clear();
  });
  return (input, signal) => {
    if (!channel.send || channel.connected === false) return null;
    if (signal?.aborted) return Promise.reject(new AppendWithdrawn());
    const id = nextId++;
    const answer = new Promise<AppendResult>((resolve, reject) => waiting.set(id, { resolve, reject }));
    try {
      channel.send({ zh: 'ledger.append', id, input } satisfies ForwardMessage); // false only means queued by Node
    } catch {
      waiting.delete(id);
      return null;
    }
    signal?.addEventListener('abort', () => {
      try {
        channel.send?.({ zh: 'ledger.withdraw', id } satisfies ForwardMessage);
      } catch {
        // The channel closed: the answer never comes; the caller's deadline has already answered it.
      }
    }, { once: true });
    return answer;
  };
}
