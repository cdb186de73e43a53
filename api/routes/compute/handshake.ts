/**
 * Federated compute (capability `compute`): `GET /v1/slim/handshake`, the hub's identity for a peer starting a
 * session: its DID, its Ed25519 signing key (the key that signs the ledger's tree heads), its X25519 key-agreement
 * key, the suites it speaks, the protocol version, and a fresh server nonce (a DPoP nonce from the shared store, so a
 * peer's first DPoP proof can carry it).
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { ServiceConfig } from '../../../core/config.node';
import { DPOP_ALGS, DPOP_NONCE_TTL_S } from '../../../core/oauth/dpop.node';
import type { CredentialStore } from '../../../store/credentials';
import type { HubKeys } from '../../../store/keys/hub-keys';

/** The handshake's protocol version; bumped when its payload changes incompatibly. */
export const SLIM_PROTOCOL_VERSION = 1;

const jwk = z.record(z.string(), z.string());
const handshakeResponse = z.object({
  ok: z.literal(true),
  protocol_version: z.number().int(),
  did: z.string(),
  signing_key: jwk.describe('Ed25519 public JWK (alg EdDSA): signs the ledger tree heads'),
  key_agreement_key: jwk.describe('X25519 public JWK (ECDH)'),
  suites: z.object({
    key_agreement: z.array(z.string()),
    signature: z.array(z.string()),
    dpop_algs: z.array(z.string())
  }),
  nonce: z.string().describe('fresh server nonce, also valid as a DPoP nonce'),
  nonce_expires_in: z.number().int(),
  time: z.string()
});

export const handshakeRoutes: FastifyPluginAsyncZod<{
  config: Pick<ServiceConfig, 'SERVICE_DID'>;
  keys: HubKeys;
  credentials: CredentialStore;
}> = async (app, { config, keys, credentials }) => {
  app.get(
    '/v1/slim/handshake',
    {
      config: {
        auth: 'none',
        directory: {
          group: 'federated_compute',
          summary: 'Node handshake: hub DID, signing and key-agreement keys, suites, nonce',
          publicRead: true
        }
      },
      schema: { response: { 200: handshakeResponse } }
    },
    async (_request, reply) => {
      reply.header('Cache-Control', 'no-store');
      const nonce = await credentials.issueDpopNonce(DPOP_NONCE_TTL_S);
      reply.header('DPoP-Nonce', nonce);
      return {
        ok: true as const,
        protocol_version: SLIM_PROTOCOL_VERSION,
        did: config.SERVICE_DID,
        signing_key: keys.jwk,
        key_agreement_key: keys.keyAgreement.jwk,
        suites: { key_agreement: ['X25519'], signature: ['Ed25519'], dpop_algs: [...DPOP_ALGS] },
        nonce,
        nonce_expires_in: DPOP_NONCE_TTL_S,
        time: new Date().toISOString()
      };
    }
  );
};
