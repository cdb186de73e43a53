/**
 * Peer hubs this hub federates with (services/federation/peers.ts).
 *   GET  /a2a/peers                 (public) name, agent-card URL, last contact, last probe status, pinned tlog keys
 *   POST /admin/peers               (admin) add or re-probe a peer: { name, agent_card_url, tlog? }; the hub fetches
 *                                   the card (5 s timeout), and the peer's tlog keys to show them; 201 new, 200 updated
 *   POST /admin/peers/:id/remove    (admin)
 * last_contact_at is the last time the peer's card was fetched successfully. `tlog` pins the peer's transparency keys
 * (docs/transparency.md#peers-in-the-registry): what the peer serves is shown as tlog_offered, never pinned by itself.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { humanText } from '../../../core/identifiers';
import { checkpointKeyProblem, submissionPrefixProblem, witnessKeyProblem } from '../../../core/config/tlog.node';
import type { PeerDocument } from '../../../store/federation/peers';
import type { PeerRegistry } from '../../../services/federation/peers';
import { ERROR_BODY } from '../../response-docs';

const publicPeer = ({ _id, tlog, tlog_offered, ...rest }: PeerDocument) => ({
  peer_id: _id,
  ...rest,
  tlog: tlog ?? null,
  tlog_offered: tlog_offered ?? null
});

/** A key name as pinned here: printable ASCII without space or `+` (C2SP signed-note allows more; peers need no more). */
const NAME = '[!-*,-~]{1,200}';
/** base64 of 0x01 || 32 bytes begins `A` then one of Q-f; of 0x04 || 32 bytes, `B` then one of A-P. */
const CHECKPOINT_KEY = `^${NAME}\\+[0-9a-f]{8}\\+A[Q-Za-f][A-Za-z0-9+/]{42}$`;
const WITNESS_KEY = `^${NAME}\\+[0-9a-f]{8}\\+B[A-P][A-Za-z0-9+/]{42}$`;
const printableName = (key: string) => new RegExp(`^${NAME}\\+`).test(key);

/** A pinned key of the peer's: optional, null to unpin; `problem` says what is wrong with a key, or null. */
const peerKey = (problem: (key: string) => string | null, pattern: string, description: string) =>
  z
    .string()
    .max(300)
    .refine((k) => printableName(k) && problem(k) === null, problem('') ?? '')
    .meta({ pattern })
    .nullable()
    .optional()
    .describe(description);

const tlogKeys = z
  .object({
    url: z
      .url()
      .max(2000)
      .refine((u) => submissionPrefixProblem(u) === null, 'an http(s) URL without query or fragment')
      .meta({ pattern: '^https?://[^?#\\s]+$' })
      .describe(
        "the peer's log prefix, <its PUBLIC_URL>/tlog: its witness's submission prefix, where its keys are read"
      ),
    verifier_key: peerKey(
      checkpointKeyProblem,
      CHECKPOINT_KEY,
      "the peer's checkpoint verifier key (its GET /tlog/verifier-key): this hub witnesses its log"
    ),
    witness_key: peerKey(
      witnessKeyProblem,
      WITNESS_KEY,
      "the peer's witness verifier key (its GET /tlog/witness-key): it witnesses this hub's log at url"
    )
  })
  .strict();

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
  card_version: z.string().nullable(),
  tlog: z
    .object({
      url: z.string(),
      verifier_key: z.string().nullable(),
      witness_key: z.string().nullable(),
      pinned_at: z.string()
    })
    .nullable()
    .describe('the transparency keys an administrator pinned (null: none)'),
  tlog_offered: z
    .object({
      fetched_at: z.string(),
      verifier_key: z.string().nullable(),
      witness_key: z.string().nullable(),
      error: z.string().nullable()
    })
    .nullable()
    .describe("what the peer's /verifier-key and /witness-key answered at the last probe: shown, never trusted")
});
const peerResponse = z.object({ ok: z.literal(true), peer: peerSchema });

export const peerRoutes: FastifyPluginAsyncZod<{ peers: PeerRegistry }> = async (app, { peers }) => {
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
        body: z
          .object({
            name: humanText(120),
            agent_card_url: z.url().refine((u) => /^https?:\/\//.test(u), 'an http(s) URL'),
            tlog: tlogKeys
              .nullable()
              .optional()
              .describe("pins the peer's transparency keys: absent keeps the pinned ones, null removes them")
          })
          .strict(),
        response: {
          200: peerResponse.describe('Updated and re-probed'),
          201: peerResponse.describe('Added and probed'),
          409: ERROR_BODY.describe(
            "A key of this hub's own (its log or its witness name), a witness name pinned for another peer, or one TLOG_WITNESSES has with another key"
          )
        }
      }
    },
    async (request, reply) => {
      const { created, peer } = await peers.add(request.body);
      return reply.code(created ? 201 : 200).send({ ok: true as const, peer: publicPeer(peer) });
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
      await peers.remove(peer_id);
      return { ok: true as const, removed: peer_id };
    }
  );
};
