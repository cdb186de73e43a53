/** Federation helpers for tests: register nodes and heartbeat through the real HTTP API, as a node would. */
import { http } from './service';

export interface RegisteredNode {
  node_id: string;
  api_key: string;
}

export async function registerNode(
  mainUrl: string,
  name: string,
  brand = 'custom',
  extra: Record<string, unknown> = {}
): Promise<RegisteredNode> {
  const res = await http('POST', `${mainUrl}/a2a/register`, {
    body: { name, brand: { code: brand, model_base: 'test-model' }, ...extra }
  });
  if (res.status !== 201) throw new Error(`register failed: ${res.status} ${res.text}`);
  return { node_id: res.body.node_id, api_key: res.body.api_key };
}

export const nodeHeaders = (node: RegisteredNode) => ({
  'x-external-node': node.node_id,
  'x-external-key': node.api_key
});

export function heartbeat(
  mainUrl: string,
  node: RegisteredNode,
  body: unknown = {
    resources: { cpu_percent: 12, gpu_count: 1, memory_used_gb: 3 },
    performance: { latency_ms: 40, tasks_done: 1 }
  }
) {
  return http('POST', `${mainUrl}/a2a/heartbeat`, { headers: nodeHeaders(node), body });
}
