/**
 * Peer hubs this hub federates with.
 *   GET  /a2a/peers                 (public) name, agent-card URL, last contact, last probe status
 *   POST /admin/peers               (admin) add or re-probe a peer: { name, agent_card_url }; the hub fetches the
 *                                   card (5 s timeout) and records the outcome; 201 new, 200 updated
 *   POST /admin/peers/:id/remove    (admin)
 * last_contact_at is the last time the peer's card was fetched successfully.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { humanText } from '../../../core/identifiers';
import { notFound } from '../../../core/errors';
import type { PeerDocument, PeerStore } from '../../../store/federation/peers';

const PROBE_TIMEOUT_MS = 5000;
const peerId = (name: string) =>
  name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '')
    .slice(0, 60) || 'peer';

async function probe(
  url: string
): Promise<{ ok: true; name: string | null; version: string | null } | { ok: false; error: string }> {
  try {
    const res = await fetch(url, {
      signal: AbortSignal.timeout(PROBE_TIMEOUT_MS),
      headers: { accept: 'application/json' }
    });
    if (!res.ok) return { ok: false, error: `agent card answered HTTP ${res.status}` };
    const card = (await res.json()) as { name?: unknown; version?: unknown };
    return {
      ok: true,
      name: typeof card.name === 'string' ? card.name : null,
      version: typeof card.version === 'string' ? card.version : null
    };
  } catch (err) {
    return {
      ok: false,
      error:
        (err as Error).name === 'TimeoutError'
          ? `no answer within ${PROBE_TIMEOUT_MS} ms`
          : `fetch failed: ${(err as Error).message}`
    };
  }
}

const publicPeer = ({ _id, ...rest }: PeerDocument) => ({ peer_id: _id, ...rest });

const peerSchema = z.object({
  peer_id: z.string(),
  name: z.string(),
  agent_card_url: z.string(),
  added_at: z.string(),
  last_contact_at: z.string().nullable().describe('the last time its agent card was fetched successfully'),
  last_probe_at: z.string(),
  last_status: z.enum(['reachable', 'unreachable']),
  last_error: z.string().nullable(),
  card_name: z.string().nullable().describe("what the peer's card says about itself, when it was reachable"),
  card_version: z.string().nullable()
});
const peerResponse = z.object({ ok: z.literal(true), peer: peerSchema });

export const peerRoutes: FastifyPluginAsyncZod<{ peers: PeerStore }> = async (app, { peers }) => {
  app.get(
    '/a2a/peers',
    {
      config: {
        auth: 'none',
        directory: { group: 'a2a_standard', summary: 'Peer registry: federated hubs, agent-card URL, last contact' }
      },
      schema: {
        response: { 200: z.object({ ok: z.literal(true), count: z.number().int(), peers: z.array(peerSchema) }) }
      }
    },
    async () => {
      const list = await peers.list();
      return { ok: true as const, count: list.length, peers: list.map(publicPeer) };
    }
  );

  app.post(
    '/admin/peers',
    {
      config: { auth: 'admin' },
      schema: {
        body: z.object({
          name: humanText(120),
          agent_card_url: z.url().refine((u) => /^https?:\/\//.test(u), 'an http(s) URL')
        }),
        response: {
          200: peerResponse.describe('Updated and re-probed'),
          201: peerResponse.describe('Added and probed')
        }
      }
    },
    async (request, reply) => {
      const { name, agent_card_url } = request.body;
      const id = peerId(name);
      const existing = await peers.find(id);
      const result = await probe(agent_card_url);
      const now = new Date().toISOString();
      const doc: PeerDocument = {
        _id: id,
        name,
        agent_card_url,
        added_at: existing?.added_at ?? now,
        last_probe_at: now,
        last_contact_at: result.ok ? now : (existing?.last_contact_at ?? null),
        last_status: result.ok ? 'reachable' : 'unreachable',
        last_error: result.ok ? null : result.error,
        card_name: result.ok ? result.name : (existing?.card_name ?? null),
        card_version: result.ok ? result.version : (existing?.card_version ?? null)
      };
      await peers.save(doc);
      return reply.code(existing ? 200 : 201).send({ ok: true as const, peer: publicPeer(doc) });
    }
  );

  app.post(
    '/admin/peers/:peer_id/remove',
    {
      config: { auth: 'admin' },
      schema: {
        params: z.object({ peer_id: z.string().regex(/^[a-z0-9-]{1,60}$/) }),
        response: { 200: z.object({ ok: z.literal(true), removed: z.string() }) }
      }
    },
    async (request) => {
      const { peer_id } = request.params;
      if (!(await peers.remove(peer_id))) throw notFound(`No peer ${peer_id}`);
      return { ok: true as const, removed: peer_id };
    }
  );
};
