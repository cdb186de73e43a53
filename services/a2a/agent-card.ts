/**
 * The A2A v1.0 agent card (api/routes/discovery/agent-card.ts serves it). It promises only what answers: the
 * interfaces are the HTTP+JSON and JSON-RPC bindings (api/routes/discovery/a2a-binding.ts), on the federation task
 * queue, with streaming (SSE) on; push notifications and the extended card are off, and every URL it names is served
 * (test/api/agent-card-a2a.test.ts checks each with the A2A SDK). Skills: the task queue's own (`federation`), one per
 * capability that online worker nodes declare (`capability:<name>`: a message naming it in
 * metadata.required_capabilities is claimed by such a node; at most MAX_CAPABILITY_SKILLS, the most widely declared
 * first, read from the node store at most every CARD_TTL_MS), and one per endpoint group actually served; the endpoint
 * directory is linked through a capability extension (the card's schema has no free-form fields).
 */
import { createHash } from 'node:crypto';
import { A2A_PROTOCOL_VERSION, FEDERATION_API_VERSION, SERVICE_NAME } from '../../core/version';
import { ENDPOINT_GROUPS, EndpointGroup } from '../../core/endpoint-groups';
import type { Config } from '../../core/config.node';
import type { NodeStore } from '../../store/federation/nodes';
import { A2A_BASE_PATH, A2A_OAUTH_SCOPE } from './interface';

export type AgentCardDeps = {
  config: Pick<Config, 'publicUrl'>;
  /** The endpoint directory: how many routes of each group this process serves. */
  directory: { countByGroup(): Map<EndpointGroup, number> };
  /** The hub's signing key, which the card names for the signed tree heads. */
  keys: { publicKeyBase64: string; kid: string };
};

const SKILLS: Record<EndpointGroup, { name: string; tags: string[]; examples: string[] }> = {
  a2a_standard: {
    name: 'Federation access',
    tags: ['a2a', 'registration', 'heartbeat', 'federation'],
    examples: ['Register a node with POST /a2a/register, then heartbeat every 30 s']
  },
  directory_tree_collab: {
    name: 'Architecture directory tree',
    tags: ['directory-tree', 'json-patch', 'review'],
    examples: ['Propose an RFC 6902 patch against the latest tree version']
  },
  review_admin: { name: 'Node review', tags: ['review', 'homologous'], examples: ['Approve a pending node'] },
  zhongshu_truth_api: {
    name: 'Truth ledger',
    tags: ['truth', 'ledger', 'merkle', 'audit'],
    examples: ['Report a truth record and verify the Merkle root']
  },
  federated_compute: { name: 'Federated compute', tags: ['compute', 'dpop', 'gpu'], examples: ['Register a GPU node'] },
  oauth_oidc: {
    name: 'OAuth 2.0 / OIDC',
    tags: ['oauth', 'oidc', 'client-credentials'],
    examples: ['Request an access token with client credentials']
  },
  kunlun_federation: {
    name: 'Partner federation',
    tags: ['partner', 'secure-channel'],
    examples: ['Open the partner secure channel']
  }
};

/** The skill the binding itself serves: a message becomes a task that worker nodes claim (capability `federation`). */
const TASK_SKILL = {
  id: 'federation',
  name: 'Federated task execution',
  description:
    'Send a message: it becomes a task in the federation queue, claimed and run by a worker node whose declared capabilities ' +
    'cover message.metadata.required_capabilities (metadata.task_type and metadata.priority optional); the node result is the ' +
    "task's artifact. Follow it with message:stream, GetTask or tasks/{id}:subscribe.",
  tags: ['federation', 'tasks', 'worker-nodes', 'queue'],
  examples: ['Summarise this document (metadata.required_capabilities: ["summarize"])'],
  inputModes: ['text/plain', 'application/json'],
  outputModes: ['application/json', 'text/plain']
};

/** The binding's credentials: a node's key, the homologous token or an OAuth access token with the scope a2a (any one). */
const CALLER_SECURITY = [
  { schemes: { external_node: { list: [] } } },
  { schemes: { homologous: { list: [] } } },
  { schemes: { oauth: { list: [A2A_OAUTH_SCOPE] } } }
];

/** At most this many capability skills on the card, read from at most NODE_SCAN_LIMIT online nodes. */
export const MAX_CAPABILITY_SKILLS = 32;
const NODE_SCAN_LIMIT = 1000;
/** The card (with its capability skills) is rebuilt at most this often; clients may cache it as long. */
export const CARD_TTL_MS = 30_000;

/** The capabilities online nodes declare, the most widely declared first (then by name), at most MAX_CAPABILITY_SKILLS. */
export async function onlineCapabilities(nodes: NodeStore): Promise<string[]> {
  const counts = new Map<string, number>();
  for (let offset = 0; offset < NODE_SCAN_LIMIT; offset += 500) {
    const page = await nodes.list({ state: 'online' }, { limit: 500, offset });
    for (const n of page.nodes) for (const cap of new Set(n.capabilities)) counts.set(cap, (counts.get(cap) ?? 0) + 1);
    if (offset + page.nodes.length >= page.total || page.nodes.length === 0) break;
  }
  return [...counts.entries()]
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
    .slice(0, MAX_CAPABILITY_SKILLS)
    .map(([cap]) => cap);
}

/** A skill per capability online worker nodes declare: what a message must name to be run by one of them. */
function capabilitySkill(cap: string) {
  return {
    id: `capability:${cap}`,
    name: `Tasks needing ${cap}`,
    description: `Send a message whose metadata.required_capabilities names ${JSON.stringify(cap)}: an online worker node declaring that capability claims the task and its result becomes the task's artifact.`,
    tags: ['federation', 'tasks', cap],
    examples: [`metadata.required_capabilities: [${JSON.stringify(cap)}]`],
    inputModes: TASK_SKILL.inputModes,
    outputModes: TASK_SKILL.outputModes,
    securityRequirements: CALLER_SECURITY
  };
}

/** Skills whose every endpoint needs one credential (the others mix public reads with authenticated writes). */
const SKILL_SECURITY: Partial<Record<EndpointGroup, string>> = { review_admin: 'homologous' };

export function buildAgentCard({ config, directory, keys }: AgentCardDeps, capabilities: string[] = []) {
  const base = config.publicUrl;
  const served = directory.countByGroup();
  return {
    name: SERVICE_NAME,
    description:
      'Federation hub for AI agent nodes: send it a message and the federation runs it as a task on a worker node; it also ' +
      'serves self-registration, heartbeat, node review, a shared architecture directory tree and an append-only truth ledger ' +
      'under a Merkle root.',
    // The binding answers every operation on the task queue (push configs and the extended card with typed errors).
    // HTTP+JSON preferred; the same operations over JSON-RPC 2.0 at /a2a/jsonrpc.
    supportedInterfaces: [
      { url: `${base}${A2A_BASE_PATH}`, protocolBinding: 'HTTP+JSON', protocolVersion: A2A_PROTOCOL_VERSION },
      { url: `${base}${A2A_BASE_PATH}/jsonrpc`, protocolBinding: 'JSONRPC', protocolVersion: A2A_PROTOCOL_VERSION }
    ],
    // The join portal says what the federation is; the bare base URL serves nothing.
    provider: { organization: 'zhongshu-hub federation', url: `${base}/a2a/join/` },
    version: FEDERATION_API_VERSION,
    documentationUrl: `${base}/docs`,
    capabilities: {
      // message:stream and tasks/{id}:subscribe answer SSE of status and artifact updates.
      streaming: true,
      pushNotifications: false,
      extendedAgentCard: false,
      extensions: [
        {
          uri: `${base}/a2a/endpoints`,
          description: 'Structured endpoint directory (method, path, group, auth model) and its summary',
          required: false,
          params: {
            directory_url: `${base}/a2a/endpoints`,
            summary_url: `${base}/a2a/endpoints/summary`,
            openapi_url: `${base}/openapi.json`
          }
        },
        {
          uri: `${base}/api/status`,
          description: 'Signed tree heads of the truth ledger: Ed25519 over tree size, root and timestamp',
          required: false,
          params: {
            algorithm: 'Ed25519',
            public_key_base64: keys.publicKeyBase64,
            key_id: keys.kid,
            jwks_uri: `${base}/.well-known/jwks.json`
          }
        }
      ]
    },
    securitySchemes: {
      external_node: {
        apiKeySecurityScheme: {
          location: 'header',
          name: 'X-External-Key',
          description: 'Node API key from POST /a2a/register, sent with X-External-Node'
        }
      },
      homologous: {
        apiKeySecurityScheme: {
          location: 'header',
          name: 'X-ZR-Token',
          description: 'Homologous token (or X-DID + X-Capture-Token)'
        }
      },
      did: { apiKeySecurityScheme: { location: 'header', name: 'X-DID', description: 'A registered node DID' } },
      // The hub's own authorization server (client credentials); the binding takes its access tokens with scope a2a.
      oauth: {
        oauth2SecurityScheme: {
          description:
            'OAuth 2.0 client credentials from the hub (Authorization: Bearer <access token>); the token needs the scope a2a',
          flows: {
            clientCredentials: {
              tokenUrl: `${base}/v1/oauth/token`,
              scopes: { [A2A_OAUTH_SCOPE]: 'Send messages and follow, list and cancel the tasks they become' }
            }
          },
          oauth2MetadataUrl: `${base}/.well-known/oauth-authorization-server`
        }
      }
    },
    // The binding's task operations need a node key, the homologous token or an OAuth token (any one); the card is public.
    securityRequirements: CALLER_SECURITY,
    defaultInputModes: ['text/plain', 'application/json'],
    defaultOutputModes: ['text/plain', 'application/json'],
    skills: [
      { ...TASK_SKILL, securityRequirements: CALLER_SECURITY },
      ...capabilities.map(capabilitySkill),
      ...(Object.keys(ENDPOINT_GROUPS) as EndpointGroup[])
        .filter((g) => (served.get(g) ?? 0) > 0)
        .map((g) => ({
          id: g,
          name: SKILLS[g].name,
          description: ENDPOINT_GROUPS[g].description,
          tags: SKILLS[g].tags,
          examples: SKILLS[g].examples,
          ...(SKILL_SECURITY[g] ? { securityRequirements: [{ schemes: { [SKILL_SECURITY[g]!]: { list: [] } } }] } : {})
        }))
    ]
  };
}

/** The card as served: its JSON text, ETag, when it was built and since when its text has been the same. */
export type ServedCard = { body: string; etag: string; at: number; modified: number };

/**
 * The card, rebuilt at most every CARD_TTL_MS (the capability skills change as nodes come and go), by one caller at a
 * time; if the node store cannot be read, the last card is served (`onStale` hears why).
 */
export function createAgentCard(deps: AgentCardDeps & { nodes: NodeStore }, onStale: (err: unknown) => void) {
  let cached: ServedCard | null = null;
  let building: Promise<ServedCard> | null = null;
  const build = async (): Promise<ServedCard> => {
    const capabilities = await onlineCapabilities(deps.nodes).catch((err: unknown) => {
      if (!cached) throw err;
      onStale(err);
      return null;
    });
    if (capabilities === null) return { ...cached!, at: Date.now() };
    const text = JSON.stringify(buildAgentCard(deps, capabilities));
    const now = Date.now();
    return {
      body: text,
      etag: `"${createHash('sha256').update(text).digest('base64url').slice(0, 27)}"`,
      at: now,
      // Last-Modified: the time the text changed (whole seconds, as HTTP dates have).
      modified: cached?.body === text ? cached.modified : Math.floor(now / 1000) * 1000
    };
  };
  return {
    async current(): Promise<ServedCard> {
      if (cached && Date.now() - cached.at < CARD_TTL_MS) return cached;
      building ??= build().finally(() => (building = null));
      return (cached = await building);
    }
  };
}
