/**
 * Node presence: when each node was last heard from, and its latest heartbeat sample.
 *
 * Sharded by node id: PRESENCE_SHARDS shards, a node always in the same one (FNV-1a of its id). Each shard is two
 * collections, and in each every API process owns one document (its instance id), rewritten as a whole by that
 * process's group commit for the shard:
 * - `node_presence_<ss>`: when each node of the shard was last heard from by that process (`{node_id: ms}` as
 *   JSON text, about 35 bytes a node). This is what a heartbeat waits for (unless answered early: presence-recorder.ts)
 *   and what an offline check reads: one shard, a few small documents, whatever the size of the fleet;
 * - `node_presence_samples_<ss>`: the latest sample of each of those nodes, rewritten at most every
 *   PRESENCE_SAMPLES_MS per shard and process, off the heartbeat's path (the directory and the dashboard show
 *   samples at most that old).
 * One collection per shard, not one document per shard in a shared collection: a shard's rewrite reads only that
 * shard's few documents even where a database applies an update by scanning its collection (FerretDB's former SQLite
 * backend did: 430 ms for an update by _id among 10,000 documents). On FerretDB an operation costs about
 * 3-4 ms whatever its size up to some 20 KB, so fewer, larger writes are cheaper than many small ones: 16 shards
 * and a least time between two writes of one shard (PRESENCE_FLUSH_MS) bound the writes of a process to
 * 16 / PRESENCE_FLUSH_MS, each carrying every heartbeat of its shard that arrived meanwhile.
 *
 * The entries are stored as JSON text, not as subdocuments: FerretDB converts every field of every subdocument on
 * each write and read (about 80 µs per entry), while one string costs a copy.
 */
import { Collection, Db } from 'mongodb';
import type { HeartbeatSample } from '../../core/federation/vocabulary';
import { retryingUpsert } from '../mongo';

export interface PresenceEntry {
  node_id: string;
  /** Milliseconds since the epoch when the hub received the heartbeat. */
  seen_at: number;
  sample: HeartbeatSample;
}

export interface HeartbeatsPerSecond {
  /** Epoch second. */
  second: number;
  count: number;
}

/** What one read of a node's shard found, and when the read started (the time the judgement applies to). */
export interface PresenceCheck {
  seen_at: number | null;
  checked_at: number;
}

interface SeenDocument {
  _id: string; // API instance id
  updated_at: Date;
  /** JSON text of { [node_id]: seen_at ms } (this shard's nodes heard by this process). */
  seen_json: string;
  /** JSON text of HeartbeatsPerSecond[] over the last minute (this shard's heartbeats at this process). */
  per_second_json: string;
  /**
   * ms: every heartbeat of this shard that this process received before it is in this document (the write's start,
   * or earlier while a heartbeat was still in authentication). The shard's own clock: a group's sweep judges its
   * shards by it, not only by the process's presence clock, which waits for the slowest of its 16 shards and is
   * rewritten every PRESENCE_CLOCK_MS. Absent in documents written by tools and tests.
   */
  complete_through?: number;
}

/**
 * One API process's presence clock (`node_presence_clocks`, one document per process): every heartbeat it received
 * before `complete_through` is in its presence documents. Rewritten every PRESENCE_CLOCK_MS while the process runs
 * (PresenceRecorder), removed when it stops; the sweeper judges no node as of a time some running process has not
 * stored every heartbeat up to (see presenceHorizon).
 */
interface ClockDocument {
  _id: string; // API instance id
  /** ms: every heartbeat received before it is stored. */
  complete_through: number;
  /** ms (the writer's clock) when this was written. */
  written_at: number;
}

/**
 * How often an API process rewrites its presence clock (500 ms before). The sweeper's horizon trails by up to this
 * much on top of the presence writes' own lag, and a silent node's detection with it. A few tiny writes a second per
 * API process.
 */
export const PRESENCE_CLOCK_MS = 200;

/** One API process's presence clock as read (see ClockDocument). */
export interface PresenceClock {
  /** The process's instance id (absent where only the times are known). */
  instance?: string;
  complete_through: number;
  written_at: number;
}

/**
 * The time up to which presence is known to be complete: the least `complete_through` of the processes whose clock
 * was written within `liveMs` of `now` (one whose clock stopped that long ago has died, and holds nothing back any
 * more), never later than `now`. With no process clock (tests and tools writing presence directly), `now`.
 * For one shard (`shardComplete`: each process's `complete_through` in its document of that shard, from the same
 * read), a process counts with the later of its clock and its shard document: both are times before which every
 * heartbeat of the shard it received is stored, and the document's is usually the newer (the clock waits for the
 * slowest of the 16 shards and is rewritten every PRESENCE_CLOCK_MS).
 */
export function presenceHorizon(
  clocks: PresenceClock[],
  now: number,
  liveMs: number,
  shardComplete?: Map<string, number>
): number {
  let horizon = now;
  for (const c of clocks) {
    if (now - c.written_at >= liveMs) continue;
    const shard = c.instance === undefined ? undefined : shardComplete?.get(c.instance);
    horizon = Math.min(horizon, Math.max(c.complete_through, shard ?? -Infinity));
  }
  return horizon;
}

interface SamplesDocument {
  _id: string; // API instance id
  updated_at: Date;
  /** JSON text of PresenceEntry[] (the latest sample of each node of this shard heard by this process). */
  entries_json: string;
}

/** Number of presence shards. Fixed: every API process and worker must agree on a node's shard. */
export const PRESENCE_SHARDS = 16;

/** The shard of a node (FNV-1a 32-bit of its id). */
export function presenceShardOf(nodeId: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < nodeId.length; i++) {
    h ^= nodeId.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h % PRESENCE_SHARDS;
}

const pad = (shard: number) => String(shard).padStart(2, '0');

/**
 * How old a shared snapshot the directory's pages, /api/nodes, /api/status-data/nodes and the dashboard may show
 * (PresenceStore.recentSnapshot): as old as the node index they are listed from may lag (its poll of the log). One
 * node's page reads its shard instead (entriesOf).
 */
export const SHARED_SNAPSHOT_MS = 1000;

/** Every node's newest presence entry, and the heartbeats of the last minute (see PresenceStore.snapshot). */
export interface PresenceSnapshot {
  nodes: Map<string, PresenceEntry>;
  heartbeatsLastMinute: number;
}

export class PresenceStore {
  /** The last snapshot taken for recentSnapshot, and the one under way (each with the time it began). */
  private lastSnapshot: { at: number; value: PresenceSnapshot } | null = null;
  private snapshotting: { at: number; value: Promise<PresenceSnapshot> } | null = null;
  /** Each shard's samples documents as last read by entriesOf, with the time the read began. */
  private readonly samplesRead = new Map<number, { at: number; value: Promise<SamplesDocument[]> }>();
  private readonly seen: Collection<SeenDocument>[];
  private readonly samples: Collection<SamplesDocument>[];
  private readonly clocks: Collection<ClockDocument>;
  constructor(db: Db) {
    this.clocks = db.collection<ClockDocument>('node_presence_clocks');
    this.seen = Array.from({ length: PRESENCE_SHARDS }, (_, s) =>
      db.collection<SeenDocument>(`node_presence_${pad(s)}`)
    );
    this.samples = Array.from({ length: PRESENCE_SHARDS }, (_, s) =>
      db.collection<SamplesDocument>(`node_presence_samples_${pad(s)}`)
    );
  }

  /**
   * Writes this process's last-seen document of one shard (every node must belong to that shard); `completeThrough`:
   * every heartbeat of the shard this process received before it is in `seen` (see SeenDocument).
   */
  async writeSeen(
    shard: number,
    instanceId: string,
    seen: Map<string, number>,
    perSecond: HeartbeatsPerSecond[],
    completeThrough?: number
  ): Promise<void> {
    const doc: Omit<SeenDocument, '_id'> = {
      updated_at: new Date(),
      seen_json: JSON.stringify(Object.fromEntries(seen)),
      per_second_json: JSON.stringify(perSecond)
    };
    if (completeThrough !== undefined) doc.complete_through = completeThrough;
    await retryingUpsert(() => this.seen[shard]!.replaceOne({ _id: instanceId }, doc, { upsert: true }));
  }

  /** Writes this process's presence clock (see ClockDocument). */
  async writeClock(instanceId: string, completeThrough: number): Promise<void> {
    await retryingUpsert(() =>
      this.clocks.replaceOne(
        { _id: instanceId },
        { complete_through: completeThrough, written_at: Date.now() },
        { upsert: true }
      )
    );
  }

  /** Removes this process's presence clock (it stopped, every heartbeat it took stored). */
  async removeClock(instanceId: string): Promise<void> {
    await this.clocks.deleteOne({ _id: instanceId });
  }

  /** Every API process's presence clock (a few documents). */
  async readClocks(): Promise<PresenceClock[]> {
    const docs = await this.clocks.find({}).toArray();
    return docs.map((d) => ({ instance: d._id, complete_through: d.complete_through, written_at: d.written_at }));
  }

  /** Writes this process's samples document of one shard. */
  async writeSamples(shard: number, instanceId: string, entries: PresenceEntry[]): Promise<void> {
    const doc = { updated_at: new Date(), entries_json: JSON.stringify(entries) };
    await retryingUpsert(() => this.samples[shard]!.replaceOne({ _id: instanceId }, doc, { upsert: true }));
  }

  /** Writes a process's presence for any nodes, split by shard (tests and tools; the API uses PresenceRecorder). */
  async write(instanceId: string, nodes: PresenceEntry[], perSecond: HeartbeatsPerSecond[]): Promise<void> {
    const byShard = new Map<number, PresenceEntry[]>();
    for (const e of nodes) {
      const s = presenceShardOf(e.node_id);
      byShard.set(s, [...(byShard.get(s) ?? []), e]);
    }
    await Promise.all(
      [...byShard].map(async ([s, entries]) => {
        await this.writeSeen(
          s,
          instanceId,
          new Map(entries.map((e) => [e.node_id, e.seen_at])),
          s === presenceShardOf(nodes[0]!.node_id) ? perSecond : []
        );
        await this.writeSamples(s, instanceId, entries);
      })
    );
  }

  /** The newest heartbeat of one node across every API process: reads the node's shard only. */
  async check(nodeId: string): Promise<PresenceCheck> {
    const checked_at = Date.now();
    const seen = await this.readSeen(presenceShardOf(nodeId));
    return { seen_at: seen.nodes.get(nodeId) ?? null, checked_at };
  }

  /**
   * Newest heartbeat time per node of one shard, across every API process's document, its recent rate, and each
   * process's `complete_through` for the shard (see SeenDocument; for presenceHorizon).
   */
  async readSeen(
    shard: number,
    sinceSecond = Math.floor(Date.now() / 1000) - 60
  ): Promise<{ nodes: Map<string, number>; heartbeatsLastMinute: number; complete: Map<string, number> }> {
    const docs = await this.seen[shard]!.find({}).toArray();
    const nodes = new Map<string, number>();
    const complete = new Map<string, number>();
    let heartbeatsLastMinute = 0;
    for (const doc of docs) {
      if (typeof doc.complete_through === 'number') complete.set(doc._id, doc.complete_through);
      for (const [id, at] of Object.entries(JSON.parse(doc.seen_json ?? '{}') as Record<string, number>))
        if ((nodes.get(id) ?? -1) < at) nodes.set(id, at);
      for (const s of JSON.parse(doc.per_second_json ?? '[]') as HeartbeatsPerSecond[])
        if (s.second > sinceSecond) heartbeatsLastMinute += s.count;
    }
    return { nodes, heartbeatsLastMinute, complete };
  }

  /**
   * A snapshot (below) taken at most `maxAgeMs` ago, shared by the reads of this process meanwhile: the directory's
   * pages and the dashboard read presence at most once per `maxAgeMs` whatever their number. Reading every shard
   * costs some 200 ms of the embedded FerretDB at 10,000 nodes (it decodes each shard's JSON texts whole, even
   * for a projection), so a page that read its shards each time cost 3-4 times its own `_id` lookups.
   */
  async recentSnapshot(maxAgeMs: number): Promise<PresenceSnapshot> {
    const now = Date.now();
    if (this.lastSnapshot && now - this.lastSnapshot.at <= maxAgeMs) return this.lastSnapshot.value;
    if (this.snapshotting && now - this.snapshotting.at <= maxAgeMs) return this.snapshotting.value;
    const pending = { at: now, value: this.snapshot() };
    this.snapshotting = pending;
    try {
      const value = await pending.value;
      if (!this.lastSnapshot || this.lastSnapshot.at < pending.at) this.lastSnapshot = { at: pending.at, value };
      return value;
    } finally {
      if (this.snapshotting === pending) this.snapshotting = null;
    }
  }

  /** Newest entry per node across every shard (the dashboard: a read of every shard, every sample parsed). */
  async snapshot(): Promise<PresenceSnapshot> {
    const sinceSecond = Math.floor(Date.now() / 1000) - 60;
    const parts = await Promise.all(
      this.seen.map(async (_, s) => {
        const [seen, samples] = await Promise.all([this.readSeen(s, sinceSecond), this.samples[s]!.find({}).toArray()]);
        return { seen, samples };
      })
    );
    const nodes = new Map<string, PresenceEntry>();
    let heartbeatsLastMinute = 0;
    for (const { seen, samples } of parts) {
      heartbeatsLastMinute += seen.heartbeatsLastMinute;
      const latest = new Map<string, PresenceEntry>();
      for (const doc of samples)
        for (const e of JSON.parse(doc.entries_json ?? '[]') as PresenceEntry[])
          if ((latest.get(e.node_id)?.seen_at ?? -1) < e.seen_at) latest.set(e.node_id, e);
      for (const [id, at] of seen.nodes) {
        // A sample is written after its heartbeat (at most PRESENCE_SAMPLES_MS later): until then the newest known.
        const sample = latest.get(id)?.sample ?? { at: new Date(at).toISOString(), resources: {}, performance: {} };
        nodes.set(id, { node_id: id, seen_at: at, sample });
      }
    }
    return { nodes, heartbeatsLastMinute };
  }

  /**
   * A shard's samples documents from a read that began at `notBefore` or later: the last one (kept or under way) when
   * it did, else a new one, which later callers share.
   */
  private samplesOf(shard: number, notBefore: number): Promise<SamplesDocument[]> {
    const kept = this.samplesRead.get(shard);
    if (kept && kept.at >= notBefore) return kept.value;
    const at = Date.now();
    const value = this.samples[shard]!.find({}).toArray();
    this.samplesRead.set(shard, { at, value });
    // A failed read is not kept: the next caller reads again.
    value.catch(() => {
      if (this.samplesRead.get(shard)?.value === value) this.samplesRead.delete(shard);
    });
    return value;
  }

  /**
   * The newest entry of each of these nodes (those heard from), reading only their shards and taking only their
   * entries out of the stored JSON texts (see entryIn, seenIn), not parsing every node's sample (which snapshot()
   * does): one node's page, which must show its newest heartbeat. The last-seen documents are read each time; the
   * samples documents (the larger part: every node's latest sample, rewritten at most every PRESENCE_SAMPLES_MS per
   * shard and process) may come from a read of the shard at most `samplesMaxAgeMs` old, shared by the reads of this
   * process meanwhile (0: read now), unless it lacks the sample of a node's newest heartbeat and began before that
   * heartbeat: then they are read again (a read begun since is shared).
   */
  async entriesOf(nodeIds: string[], samplesMaxAgeMs = 0): Promise<Map<string, PresenceEntry>> {
    const byShard = new Map<number, string[]>();
    for (const id of nodeIds) {
      const s = presenceShardOf(id);
      byShard.set(s, [...(byShard.get(s) ?? []), id]);
    }
    const out = new Map<string, PresenceEntry>();
    await Promise.all(
      [...byShard].map(async ([s, ids]) => {
        const asked = Date.now();
        const [seenDocs, kept] = await Promise.all([
          this.seen[s]!.find({}, { projection: { seen_json: 1 } }).toArray(),
          this.samplesOf(s, asked - samplesMaxAgeMs)
        ]);
        const seenAt = new Map<string, number>();
        for (const id of ids)
          for (const doc of seenDocs) {
            const at = seenIn(doc.seen_json ?? '{}', id);
            if (at !== null && at > (seenAt.get(id) ?? -1)) seenAt.set(id, at);
          }
        const latestIn = (docs: SamplesDocument[], id: string) => {
          let latest: PresenceEntry | null = null;
          for (const doc of docs) {
            const e = entryIn(doc.entries_json ?? '[]', id);
            if (e && (latest === null || latest.seen_at < e.seen_at)) latest = e;
          }
          return latest;
        };
        // A kept read that lacks a node's newest heartbeat's sample and began before that heartbeat is read again
        // (the sample may have been written since); one that began after it is as new as a read now would be, for
        // the sample is written after the heartbeat. Callers meanwhile share that read.
        const missing = [...seenAt].filter(([id, at]) => (latestIn(kept, id)?.seen_at ?? -1) < at).map(([, at]) => at);
        const sampleDocs =
          samplesMaxAgeMs > 0 && missing.length > 0 ? await this.samplesOf(s, Math.max(...missing)) : kept;
        for (const [id, at] of seenAt) {
          // As in snapshot(): until its sample is written, the newest known.
          const sample = latestIn(sampleDocs, id)?.sample ?? {
            at: new Date(at).toISOString(),
            resources: {},
            performance: {}
          };
          out.set(id, { node_id: id, seen_at: at, sample });
        }
      })
    );
    return out;
  }

  /** Drops documents of API processes that stopped writing long ago (a scan of each shard's few documents). */
  async prune(olderThan: Date): Promise<void> {
    await Promise.all(
      [...this.seen, ...this.samples].map((c: Collection<SeenDocument> | Collection<SamplesDocument>) =>
        c.deleteMany({ updated_at: { $lt: olderThan } })
      )
    );
    await this.clocks.deleteMany({ written_at: { $lt: olderThan.getTime() } });
  }
}

/**
 * A node's time in a last-seen document's JSON text (`{"<node id>":<ms>,…}`, every value a number), without parsing
 * the rest. Node ids hold no character JSON escapes; a text written otherwise is parsed whole.
 */
export function seenIn(json: string, nodeId: string): number | null {
  const key = `"${nodeId}":`;
  const at = json.indexOf(key);
  if (at < 0) return json.includes(`"${nodeId}"`) ? wholeSeen(json, nodeId) : null;
  const from = at + key.length;
  let end = from;
  while (end < json.length && json[end] !== ',' && json[end] !== '}') end++;
  const value = Number(json.slice(from, end));
  return Number.isFinite(value) ? value : wholeSeen(json, nodeId);
}

function wholeSeen(json: string, nodeId: string): number | null {
  const value = (JSON.parse(json) as Record<string, unknown>)[nodeId];
  return typeof value === 'number' ? value : null;
}

/**
 * A node's entry in a samples document's JSON text (`[{"node_id":"<id>","seen_at":…,"sample":{…}},…]`), without
 * parsing the others. An entry starts with `[{"node_id":"<id>"` or `,{"node_id":"<id>"`, which nothing inside an
 * entry can hold (within a string its quotes are escaped, and a sample holds no array); it ends where the next entry
 * starts, or at the closing `]`. A text written another way (another member order) is parsed whole.
 */
export function entryIn(json: string, nodeId: string): PresenceEntry | null {
  const head = `{"node_id":${JSON.stringify(nodeId)},`;
  let at = json.indexOf(head);
  while (at > 0 && json[at - 1] !== '[' && json[at - 1] !== ',') at = json.indexOf(head, at + 1);
  if (at <= 0) return json.includes(JSON.stringify(nodeId)) ? wholeEntry(json, nodeId) : null;
  const next = json.indexOf(',{"node_id":', at + head.length);
  const end = next >= 0 ? next : json.lastIndexOf(']');
  try {
    const entry = JSON.parse(json.slice(at, end)) as PresenceEntry;
    return entry.node_id === nodeId ? entry : wholeEntry(json, nodeId);
  } catch {
    return wholeEntry(json, nodeId);
  }
}

function wholeEntry(json: string, nodeId: string): PresenceEntry | null {
  let latest: PresenceEntry | null = null;
  for (const e of JSON.parse(json) as PresenceEntry[])
    if (e.node_id === nodeId && (latest === null || latest.seen_at < e.seen_at)) latest = e;
  return latest;
}
