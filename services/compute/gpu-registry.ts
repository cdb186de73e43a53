/**
 * The GPU registry (POST /v1/gpu/register, GET /v1/gpu/nodes): a node declares GPU records of its own, and anyone
 * lists them with their owner node's state. A GPU is `available` only while its node is online (the node
 * lifecycle's judgement of presence), and unavailable when the node is offline, pending review, rejected or gone.
 */
import { AppError } from '../../core/errors';
import { MAX_GPUS_PER_NODE, type GpuDocument, type GpuRecordInput, type GpuStore } from '../../store/compute/gpu';
import type { NodeStore } from '../../store/federation/nodes';
import { SHARED_SNAPSHOT_MS, type PresenceStore } from '../../store/federation/presence';

export interface GpuListQuery {
  available?: 'true' | 'false';
  model?: string;
  node_id?: string;
  limit: number;
  offset: number;
}

const publicGpu = ({ _id, ...rest }: GpuDocument) => ({ gpu_id: _id, ...rest });

export function createGpuRegistry({
  gpus,
  nodes,
  presence
}: {
  gpus: GpuStore;
  nodes: NodeStore;
  presence: PresenceStore;
}) {
  /** Registers (or, for a name it already has, updates) a record of `nodeId`; `created` tells which. */
  async function register(nodeId: string, record: Omit<GpuRecordInput, 'node_id'>) {
    const node = await nodes.findPublic(nodeId);
    // The authenticator found the node a moment ago; it can only be gone if it was deleted meanwhile.
    if (!node) throw new AppError('unauthorized', 'Unknown node');
    const saved = await gpus.upsert({
      node_id: nodeId,
      name: record.name,
      model: record.model,
      memory_gb: record.memory_gb,
      count: record.count,
      price: record.price,
      endpoint: record.endpoint
    });
    if (!saved)
      throw new AppError(
        'conflict',
        `A node holds at most ${MAX_GPUS_PER_NODE} GPU records; re-register an existing name to update it`
      );
    return {
      created: saved.created,
      answer: {
        ok: true as const,
        gpu: publicGpu(saved.gpu),
        node_state: node.state,
        available: node.state === 'online'
      }
    };
  }

  /**
   * One page of the records matching `q`, each with its node's state and when the hub last heard the node. The states
   * come from the node index, as the directory's do (about a second behind the node documents); last heard from a
   * presence snapshot at most SHARED_SNAPSHOT_MS old, and for an online node heard from only since, its own shard.
   */
  async function list(q: GpuListQuery) {
    const all = await gpus.list({ model: q.model, nodeId: q.node_id });
    const nodeIds = [...new Set(all.map((g) => g.node_id))];
    const [states, snapshot] = await Promise.all([
      nodes.statesOf(nodeIds),
      nodeIds.length ? presence.recentSnapshot(SHARED_SNAPSHOT_MS).then((s) => s.nodes) : new Map<string, never>()
    ]);
    const unseen = nodeIds.filter((id) => states.get(id) === 'online' && !snapshot.has(id));
    const seen = unseen.length ? new Map([...snapshot, ...(await presence.entriesOf(unseen))]) : snapshot;
    const listed = all.map((g) => {
      const state = states.get(g.node_id) ?? null;
      const lastSeen = seen.get(g.node_id)?.seen_at;
      return {
        ...publicGpu(g),
        node_state: state,
        available: state === 'online',
        last_seen_at: typeof lastSeen === 'number' ? new Date(lastSeen).toISOString() : null
      };
    });
    const availableTotal = listed.filter((g) => g.available).length;
    const matching =
      q.available === undefined ? listed : listed.filter((g) => g.available === (q.available === 'true'));
    const page = matching.slice(q.offset, q.offset + q.limit);
    return {
      ok: true as const,
      total: matching.length,
      available_total: availableTotal,
      offset: q.offset,
      limit: q.limit,
      next_offset: q.offset + page.length < matching.length ? q.offset + page.length : null,
      gpus: page
    };
  }

  return { register, list };
}
