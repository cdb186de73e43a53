/**
 * The TypeScript SDK's outbox on its own (no stack): the group commit of its journal. Every enqueue that returned is
 * in the journal a new outbox reads, whatever the sync mode; flush() waits for the disk; a close or a compaction while
 * an fdatasync runs loses nothing and leaves no descriptor behind. Prints what one enqueue call cost in each mode
 * (a figure, not an assertion): with 'group' the call waits for no disk.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Outbox, type OutboxSync } from '../../../sdk/typescript/src';

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'sdk-outbox-'));
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

let n = 0;
const journal = () => path.join(scratch, `j${n++}`, 'outbox.jsonl');
const openFds = () => fs.readdirSync('/proc/self/fd').length;

describe.each<OutboxSync>(['group', 'each', 'none'])("sync '%s'", (sync) => {
  it('keeps every write that returned, and prints what a call cost', async () => {
    const file = journal();
    const box = new Outbox(file, { sync });
    const ms: number[] = [];
    for (let i = 0; i < 1000; i++) {
      const t0 = performance.now();
      box.enqueue({ key: `sdk.outbox.${i}`, value: { i } });
      ms.push(performance.now() - t0);
      if (i % 100 === 99) await new Promise((r) => setImmediate(r)); // let group syncs run between bursts
    }
    await box.flush();
    box.close();
    const sorted = [...ms].sort((a, b) => a - b);
    const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!.toFixed(3);
    console.log(
      `enqueue, sync '${sync}': median ${at(0.5)} ms, p99 ${at(0.99)} ms, max ${at(1)} ms, ` +
        `${ms.filter((t) => t > 1).length} of 1000 over 1 ms`
    );
    const reopened = new Outbox(file);
    expect(reopened.take('pending', 2000).map((r) => r.key)).toEqual(
      Array.from({ length: 1000 }, (_, i) => `sdk.outbox.${i}`)
    );
    reopened.close();
  });
});

describe("sync 'group'", () => {
  it('flush() resolves at once when nothing is waiting for the disk, and after the lines appended before it', async () => {
    const box = new Outbox(journal());
    await box.flush();
    box.enqueue({ key: 'sdk.a', value: {} });
    const first = box.flush();
    box.enqueue({ key: 'sdk.b', value: {} }); // while the first fdatasync may run: the next one covers it
    const second = box.flush();
    await expect(Promise.all([first, second])).resolves.toBeDefined();
    await box.flush();
    box.close();
  });

  it('closes while an fdatasync runs without losing a line or leaking the descriptor', async () => {
    const before = openFds();
    for (let round = 0; round < 20; round++) {
      const file = journal();
      const box = new Outbox(file);
      for (let i = 0; i < 50; i++) box.enqueue({ key: `sdk.close.${i}`, value: { i } });
      const flushed = box.flush();
      box.close(); // an fdatasync is usually under way here
      await flushed;
      const reopened = new Outbox(file);
      expect(reopened.counts().pending).toBe(50);
      reopened.close();
    }
    await new Promise((r) => setTimeout(r, 50)); // the last fdatasync callbacks close their descriptors
    expect(openFds()).toBe(before);
  });

  it('compacts while an fdatasync runs: the new journal holds the open writes, flush() still resolves', async () => {
    const file = journal();
    const box = new Outbox(file);
    const ids = Array.from({ length: 3000 }, (_, i) => box.enqueue({ key: `sdk.compact.${i}`, value: { i } }).id);
    // Acknowledging all but the last ten grows the journal past the compaction slack: it is rewritten meanwhile.
    for (const id of ids.slice(0, -10)) box.acknowledge(id, 1, 'e');
    await box.flush();
    box.close();
    expect(fs.readFileSync(file, 'utf8').split('\n').length).toBeLessThan(6000);
    const reopened = new Outbox(file);
    expect(reopened.counts()).toMatchObject({ pending: 10, acknowledged: 0 });
    reopened.close();
  });
});
