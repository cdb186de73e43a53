/**
 * One node's presence (PresenceStore.entriesOf in store/federation/presence.ts) takes only that node's entries out
 * of the stored JSON texts: it must find what a parse of every entry (snapshot()) finds, whatever the samples hold
 * (figures named like the entry's own members, strings that look like an entry, ids that are prefixes of one
 * another), across several API processes' documents. The shared snapshot of the lists and the dashboard
 * (recentSnapshot) is reused within its age only.
 */
import type { HeartbeatSample } from '../../../core/federation/vocabulary';
import {
  entryIn,
  PresenceStore,
  presenceShardOf,
  seenIn,
  type PresenceEntry
} from '../../../store/federation/presence';
import { useStoreDb } from '../../support/store-db';

const testDb = useStoreDb('presence_entries', { indexes: false });

const id = (n: number) => `ext-custom-${String(n).padStart(6, '0')}`;

function sample(n: number, at: number): HeartbeatSample {
  const tricky: Record<string, string | number | boolean | null> = {
    node_id: id(n + 1),
    seen_at: at + 5,
    note: `,{"node_id":"${id(n + 2)}","seen_at":1,"sample":{}}]`,
    brace: '}],[{',
    flag: n % 2 === 0,
    none: null
  };
  return {
    at: new Date(at).toISOString(),
    resources: { cpu_percent: n % 100, gpu_count: n % 3 },
    performance: { latency_ms: 10 + n },
    ...(n % 3 === 0 ? { extra: tricky } : {})
  };
}

it('finds in the JSON texts exactly what a full parse finds', () => {
  const at = Date.now();
  // Ids that are prefixes of one another (ext-custom-0000011 after ext-custom-000001).
  const ids = [...Array.from({ length: 30 }, (_, i) => id(i + 1)), 'ext-custom-0000011', 'ext-custom-1000001'];
  const entries: PresenceEntry[] = ids.map((nodeId, i) => ({
    node_id: nodeId,
    seen_at: at + i,
    sample: sample(i, at)
  }));
  const json = JSON.stringify(entries);
  const seenJson = JSON.stringify(Object.fromEntries(entries.map((e) => [e.node_id, e.seen_at])));
  for (const e of entries) {
    expect(entryIn(json, e.node_id)).toEqual(e);
    expect(seenIn(seenJson, e.node_id)).toBe(e.seen_at);
  }
  for (const absent of ['ext-custom-000099', 'ext-custom-00000', 'ext-custom-0000012']) {
    expect(entryIn(json, absent)).toBeNull();
    expect(seenIn(seenJson, absent)).toBeNull();
  }
  expect(entryIn('[]', id(1))).toBeNull();
  // Written with another member order: found by a parse of the whole text.
  const reordered = JSON.stringify(entries.map((e) => ({ seen_at: e.seen_at, sample: e.sample, node_id: e.node_id })));
  expect(entryIn(reordered, id(4))).toEqual(entries[3]);
});

it('reads for a page what the snapshot of every shard holds for those nodes', async () => {
  const store = new PresenceStore(testDb.db);
  const at = Date.now() - 10_000;
  const ids = Array.from({ length: 200 }, (_, i) => id(i + 1));
  // Two API processes heard overlapping nodes at different times; some nodes are seen with no sample written yet.
  const first: PresenceEntry[] = ids.slice(0, 150).map((nodeId, i) => ({
    node_id: nodeId,
    seen_at: at + i,
    sample: sample(i, at + i)
  }));
  const second: PresenceEntry[] = ids.slice(100).map((nodeId, i) => ({
    node_id: nodeId,
    seen_at: at + 1000 + (i % 2 === 0 ? i : -5000),
    sample: sample(i + 7, at + 1000)
  }));
  await store.write('api-1', first, []);
  await store.write('api-2', second, []);
  const unsampled = id(500);
  await store.writeSeen(presenceShardOf(unsampled), 'api-3', new Map([[unsampled, at + 42]]), []);

  const all = (await store.snapshot()).nodes;
  const page = [...ids.filter((_, i) => i % 7 === 0), unsampled, id(999)];
  const got = await store.entriesOf(page);
  expect(Object.fromEntries(got)).toEqual(
    Object.fromEntries(page.filter((n) => all.has(n)).map((n) => [n, all.get(n)!]))
  );
  // A shared snapshot is reused within its age and taken again after it.
  const shared = await store.recentSnapshot(60_000);
  expect(await store.recentSnapshot(60_000)).toBe(shared);
  await store.writeSeen(presenceShardOf(unsampled), 'api-3', new Map([[unsampled, at + 43]]), []);
  expect((await store.recentSnapshot(60_000)).nodes.get(unsampled)?.seen_at).toBe(at + 42);
  expect((await store.recentSnapshot(0)).nodes.get(unsampled)?.seen_at).toBe(at + 43);

  // One node's page: its last-seen read now, its sample from a shard read at most samplesMaxAgeMs old.
  const node = ids[3]!;
  const shard = presenceShardOf(node);
  const before = (await store.entriesOf([node], 60_000)).get(node)!;
  // A heartbeat heard after the kept read began, its sample written: the samples are read again.
  const beat = Date.now() + 5;
  await new Promise((r) => setTimeout(r, 10));
  const later = { node_id: node, seen_at: beat, sample: sample(77, beat) };
  await store.writeSeen(shard, 'api-1', new Map([[node, later.seen_at]]), []);
  await store.writeSamples(shard, 'api-1', [later]);
  expect((await store.entriesOf([node], 60_000)).get(node)).toEqual(later);
  // A sample written after that read, for a heartbeat heard before it began, waits for the read's age...
  const resampled = { ...later, seen_at: beat + 1, sample: sample(78, beat + 1) };
  await store.writeSeen(shard, 'api-1', new Map([[node, resampled.seen_at]]), []);
  await store.writeSamples(shard, 'api-1', [resampled]);
  const waiting = (await store.entriesOf([node], 60_000)).get(node)!;
  expect(waiting.seen_at).toBe(resampled.seen_at);
  expect(waiting.sample).toEqual(later.sample);
  // ... and is read at once without it.
  expect((await store.entriesOf([node])).get(node)).toEqual(resampled);
  expect(before.seen_at).toBeLessThan(later.seen_at);
});
