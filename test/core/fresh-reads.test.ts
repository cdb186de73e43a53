/**
 * core/fresh-reads.ts: the API key read that requests arriving together share. What auth relies on:
 * every caller gets a read that started after it asked (so a revocation made before a request arrived is seen),
 * and a key asked for on many connections at once costs one read per round trip, not one per request.
 */
import { FreshReads } from '../../core/fresh-reads';

/** A read whose answers the test releases one by one, recording when each read started. */
function controlledReads() {
  const started: { id: string; at: number; resolve: (v: string) => void; reject: (e: Error) => void }[] = [];
  let clock = 0;
  const reads = new FreshReads<string>(
    (id) =>
      new Promise<string>((resolve, reject) => {
        started.push({ id, at: ++clock, resolve, reject });
      })
  );
  return { reads, started, tick: () => ++clock };
}

const flush = () => new Promise((r) => setImmediate(r));

it('gives every caller a read that started after it asked, sharing the one not yet started', async () => {
  const { reads, started, tick } = controlledReads();
  const first = reads.get('k');
  expect(started).toHaveLength(1);
  // Callers arriving while the first read runs wait for the next one, which starts after they all asked.
  const asked = tick();
  const second = reads.get('k');
  const third = reads.get('k');
  expect(started).toHaveLength(1);
  started[0]!.resolve('v1');
  await expect(first).resolves.toBe('v1');
  await flush();
  expect(started).toHaveLength(2);
  expect(started[1]!.at).toBeGreaterThan(asked);
  started[1]!.resolve('v2');
  await expect(second).resolves.toBe('v2');
  await expect(third).resolves.toBe('v2');
  // Nothing in flight: the next caller starts its own read at once.
  const fourth = reads.get('k');
  expect(started).toHaveLength(3);
  started[2]!.resolve('v3');
  await expect(fourth).resolves.toBe('v3');
});

it('keeps keys apart, and a failed read fails only its own callers', async () => {
  const { reads, started } = controlledReads();
  const a = reads.get('a');
  const b = reads.get('b');
  expect(started.map((s) => s.id)).toEqual(['a', 'b']);
  const a2 = reads.get('a');
  started[0]!.reject(new Error('down'));
  await expect(a).rejects.toThrow('down');
  await flush();
  expect(started.map((s) => s.id)).toEqual(['a', 'b', 'a']);
  started[2]!.resolve('a-ok');
  await expect(a2).resolves.toBe('a-ok');
  started[1]!.resolve('b-ok');
  await expect(b).resolves.toBe('b-ok');
});
