/**
 * The checkpoint publisher (services/tlog/publisher.ts) as the witnesses change at run time (the peer registry):
 * it signals the witness workflows as soon as the set changes, not only at a new checkpoint, and retires the
 * workflows of removed witnesses then, after reading the registry afresh. The Temporal calls are replaced; no stack.
 */
import type { Client } from '@temporalio/client';
import type { Logger } from 'pino';
import type { LogWitness } from '../../../core/config/tlog.node';
import { startCheckpointPublisher } from '../../../services/tlog/publisher';
import { retireRemovedWitnesses, signalWitnesses } from '../../../workflows/tlog/witness.client';

jest.mock('../../../workflows/tlog/witness.client', () => ({
  signalWitnesses: jest.fn(async () => undefined),
  retireRemovedWitnesses: jest.fn(async () => [])
}));
const signalled = signalWitnesses as jest.MockedFunction<typeof signalWitnesses>;
const retired = retireRemovedWitnesses as jest.MockedFunction<typeof retireRemovedWitnesses>;

const witness = (name: string): LogWitness => ({ name, verifierKey: `${name}+key`, url: `https://${name}/tlog` });
const flush = async () => {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
};

describe('the checkpoint publisher with witnesses that change at run time', () => {
  beforeEach(() => {
    jest.useFakeTimers({ doNotFake: ['setImmediate'] });
    signalled.mockClear();
    retired.mockClear();
  });
  afterEach(() => jest.useRealTimers());

  it('signals a witness as soon as it is added, and retires one as soon as it is removed', async () => {
    let witnesses: LogWitness[] = [];
    let refreshes = 0;
    const stop = startCheckpointPublisher({
      tlog: { origin: 'self.test/tlog', current: async () => 'self.test/tlog\n7\nroot\n\n— sig\n' },
      temporal: {} as Client,
      coreQueue: 'q',
      witnesses: () => witnesses,
      refreshWitnesses: async () => {
        refreshes++;
      },
      intervalMs: 1000,
      logger: { warn: jest.fn(), info: jest.fn(), error: jest.fn() } as unknown as Logger
    });
    await flush();
    // At the start: nothing to signal, the workflows of removed witnesses retired after a fresh read.
    expect(signalled).not.toHaveBeenCalled();
    expect(retired).toHaveBeenCalledTimes(1);
    expect(refreshes).toBe(1);

    // Nothing changed: no signal, no listing.
    await jest.advanceTimersByTimeAsync(1000);
    await flush();
    expect(retired).toHaveBeenCalledTimes(1);

    witnesses = [witness('b')];
    await jest.advanceTimersByTimeAsync(1000);
    await flush();
    expect(signalled).toHaveBeenCalledTimes(1);
    expect(signalled.mock.calls[0]![3]).toEqual([witness('b')]);
    // The same size and witnesses: not again.
    await jest.advanceTimersByTimeAsync(1000);
    await flush();
    expect(signalled).toHaveBeenCalledTimes(1);
    // A second witness at the same size: signalled at once (its workflow starts), not at the next checkpoint.
    witnesses = [witness('b'), witness('c')];
    await jest.advanceTimersByTimeAsync(1000);
    await flush();
    expect(signalled).toHaveBeenCalledTimes(2);
    expect(signalled.mock.calls[1]![3]).toEqual([witness('b'), witness('c')]);

    retired.mockClear();
    witnesses = [];
    await jest.advanceTimersByTimeAsync(1000);
    await flush();
    expect(signalled).toHaveBeenCalledTimes(2);
    expect(retired).toHaveBeenCalledTimes(1);
    expect(retired.mock.calls[0]![2]).toEqual([]);
    stop();
  });
});
