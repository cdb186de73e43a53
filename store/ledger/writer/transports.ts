/**
 * The three ways an append reaches the ledger's writer (the WriterTransport seam, store/ledger/append.ts), one
 * implementation each. A process picks one at start-up and hands it to its Ledger:
 *   appendHere                 a single process, the cluster primary without the lease, the tests: its own engine;
 *   viaClusterPrimary(channel) an API process of a cluster (API_PROCESSES > 1): the primary over IPC
 *                              (cluster-primary.ts);
 *   viaLeaseHolder(member)     a process taking part in the writer lease (LEDGER_FORWARD_SECRET): the holder over
 *                              HTTP while another replica holds it (lease-holder.ts).
 * A forwarding way appends here whatever it cannot hand over (no channel, the lease held here, nothing delivered):
 * safe, only slower, since the seq is unique whoever writes.
 */
import {
  ForwardAppend,
  ForwardCountedAppend,
  ForwardNotDelivered,
  type WriterTransport,
  type WriterWay
} from '../append';
import type { CommitEngine } from '../commit-engine';
import { forwardAppendsTo, type IpcEnd } from './cluster-primary';
import type { WriterLeaseMember } from './lease-holder';

/** How a Ledger is told its way to the writer: given the process's engine, the transport. */
export type WriterChoice = (engine: CommitEngine) => WriterTransport;

/** Every append is committed by this process's own engine. */
export const appendHere: WriterChoice = (engine) => ({
  way: 'here',
  append: (input, options) => engine.append(input, options.signal),
  appendCounted: () => Promise.resolve(null)
});

/** An API process of a cluster: appends go to the cluster primary at the other end of `channel` (`process`). */
export const viaClusterPrimary =
  (channel: IpcEnd): WriterChoice =>
  (engine) =>
    forwarding('cluster-primary', engine, forwardAppendsTo(channel), null);

/** A member of the writer lease: appends (and truth writes with their quota slot) go to the holder elsewhere. */
export const viaLeaseHolder =
  (member: Pick<WriterLeaseMember, 'forward' | 'forwardCounted'>): WriterChoice =>
  (engine) =>
    forwarding('lease-holder', engine, member.forward, member.forwardCounted);

function forwarding(
  way: WriterWay,
  engine: CommitEngine,
  forward: ForwardAppend,
  forwardCounted: ForwardCountedAppend | null
): WriterTransport {
  return {
    way,
    append(input, options) {
      const forwarded = forward(input, options.signal, {
        direct: options.direct ?? false,
        deadline: options.deadline ?? null
      });
      if (!forwarded) return engine.append(input, options.signal);
      return forwarded.then(
        (result) => engine.forwarded(result),
        // Nothing reached the writer (ForwardNotDelivered): appended here instead.
        (err: unknown) =>
          err instanceof ForwardNotDelivered ? engine.append(input, options.signal) : Promise.reject(err)
      );
    },
    async appendCounted(input, quota, options) {
      const forwarded = forwardCounted?.(input, quota, options.signal, options.deadline ?? null);
      if (!forwarded) return null;
      try {
        const result = await forwarded;
        return result === 'over_quota' ? result : engine.forwarded(result);
      } catch (err) {
        if (err instanceof ForwardNotDelivered) return null; // the caller claims and appends here
        throw err;
      }
    }
  };
}

/**
 * The way for one process, decided once at start-up: an API process of a cluster hands its appends to the primary
 * (which is the host's writer, itself a lease member where the lease is on); a lease member forwards to the holder;
 * anything else appends here.
 */
export function chooseWriter(how: {
  clusterPrimary?: IpcEnd | null;
  leaseMember?: Pick<WriterLeaseMember, 'forward' | 'forwardCounted'> | null;
}): WriterChoice {
  if (how.clusterPrimary) return viaClusterPrimary(how.clusterPrimary);
  if (how.leaseMember) return viaLeaseHolder(how.leaseMember);
  return appendHere;
}
