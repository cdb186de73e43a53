/** Federation helpers for tests: register nodes and heartbeat through the real HTTP API, as a node would. */
import type { TestService } from './service';
import { eventually, http } from './service';

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

/**
 * A worker node as the work tests need one: registered (declaring `capabilities`), approved by a reviewer's
 * homologous token, and beating until the service holds it online.
 */
export async function onlineWorkerNode(
  svc: TestService,
  reviewerToken: string,
  name: string,
  capabilities: string[] = []
): Promise<RegisteredNode> {
  const node = await registerNode(svc.urls.main, name, 'custom', { capabilities: { declared: capabilities } });
  const approved = await http('POST', `${svc.urls.main}/a2a/review/approve`, {
    headers: { 'x-zr-token': reviewerToken },
    body: { node_id: node.node_id, reason: 'test worker' }
  });
  if (approved.status !== 200) throw new Error(`approve failed: ${approved.status} ${approved.text}`);
  await eventually(
    async () => {
      await heartbeat(svc.urls.main, node);
      const state = (await svc.db.collection('nodes').findOne({ _id: node.node_id as never }))?.state;
      return state === 'online' ? true : undefined;
    },
    30_000,
    `${name} online`
  );
  return node;
}
