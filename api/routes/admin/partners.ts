/**
 * Administration of partner federation (Bearer ADMIN_TOKEN): register a partner with its Ed25519 public key, list,
 * revoke. The partner id is the `keyid` its request signatures name (api/plugins/auth/partner.ts). Each
 * registration and revocation is recorded in the ledger (public key included: it is public).
 */
import { createPublicKey } from 'node:crypto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { ServiceConfig } from '../../../core/config.node';
import { AppError, notFound } from '../../../core/errors';
import { humanText } from '../../../core/identifiers';
import type { Ledger } from '../../../store/ledger/ledger';
import type { PartnerDocument, PartnerStore } from '../../../store/partner/partners';
import { ERROR_BODY } from '../../response-docs';

export const PARTNER_ID = /^[a-z0-9][a-z0-9._-]{1,63}$/;
/** 32 bytes in base64url without padding: 43 characters, the last carrying 4 bits (its 2 low bits zero). */
const RAW_KEY = /^[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]$/;
const partnerIdSchema = z.string().regex(PARTNER_ID, 'lower-case letters, digits, ".", "_" or "-", 2 to 64');

const partnerView = z.object({
  partner_id: z.string(),
  name: z.string(),
  public_key: z.string(),
  public_jwk: z.record(z.string(), z.string()),
  created_at: z.string(),
  revoked_at: z.string().nullable()
});
const registered = z.object({ ok: z.literal(true), created: z.boolean(), partner: partnerView });
const view = (p: PartnerDocument) => ({
  partner_id: p._id,
  name: p.name,
  public_key: p.public_key,
  public_jwk: { kty: 'OKP', crv: 'Ed25519', x: p.public_key },
  created_at: p.created_at,
  revoked_at: p.revoked_at
});

/** A usable Ed25519 public key (32 raw bytes, base64url), or null. */
function ed25519Raw(value: string): string | null {
  const raw = Buffer.from(value, 'base64url');
  if (raw.length !== 32 || raw.toString('base64url') !== value) return null;
  try {
    createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: value }, format: 'jwk' });
    return value;
  } catch {
    return null;
  }
}

export const partnerAdminRoutes: FastifyPluginAsyncZod<{
  partners: PartnerStore;
  ledger: Ledger;
  config: Pick<ServiceConfig, 'SERVICE_DID'>;
}> = async (app, { partners, ledger, config }) => {
  const admin = { auth: 'admin' as const };
  const record = (action: string, value: Record<string, string | null>) =>
    ledger.append({ kind: 'event', key: `hub.admin.${action}`, value, did: config.SERVICE_DID, truth_type: 'config' });

  app.post(
    '/admin/partners',
    {
      config: admin,
      schema: {
        body: z
          .object({
            partner_id: partnerIdSchema.describe('the keyid the partner puts in its signatures'),
            name: humanText(200),
            public_key: z
              .union([
                z.string().regex(RAW_KEY, 'the 32-byte Ed25519 public key, base64url without padding'),
                z.object({
                  kty: z.literal('OKP'),
                  crv: z.literal('Ed25519'),
                  x: z.string().regex(RAW_KEY, 'the 32-byte Ed25519 public key, base64url without padding')
                })
              ])
              .describe('Ed25519 public key: base64url of the 32 raw bytes, or a public JWK (kty OKP, crv Ed25519)')
          })
          .strict(),
        response: {
          200: registered.describe('Already registered with this key (created false)'),
          201: registered.describe('Registered (created true)'),
          409: ERROR_BODY.describe('The id is taken by another key, or was revoked')
        }
      }
    },
    async (request, reply) => {
      const body = request.body;
      const key = ed25519Raw(typeof body.public_key === 'string' ? body.public_key : body.public_key.x);
      if (!key)
        throw new AppError('invalid_request', 'public_key is not a valid Ed25519 public key', {
          fields: [{ field: 'public_key', message: 'not an Ed25519 public key' }]
        });
      const { partner, created } = await partners.register(body.partner_id, body.name, key);
      if (!created && (partner.public_key !== key || partner.revoked_at))
        throw new AppError(
          'conflict',
          `partner ${body.partner_id} is already registered with another key or was revoked; choose another id`
        );
      if (created) await record('partner_registered', { partner_id: partner._id, name: partner.name, public_key: key });
      return reply.code(created ? 201 : 200).send({ ok: true as const, created, partner: view(partner) });
    }
  );

  app.get(
    '/admin/partners',
    { config: admin, schema: { response: { 200: z.object({ ok: z.literal(true), partners: z.array(partnerView) }) } } },
    async () => ({
      ok: true as const,
      partners: (await partners.list()).map(view)
    })
  );

  app.post(
    '/admin/partners/:partner_id/revoke',
    {
      config: admin,
      schema: {
        params: z.object({ partner_id: partnerIdSchema }),
        response: { 200: z.object({ ok: z.literal(true), partner_id: z.string(), revoked: z.literal(true) }) }
      }
    },
    async (request) => {
      const id = request.params.partner_id;
      if (!(await partners.revoke(id))) throw notFound(`No active partner ${id}`);
      await record('partner_revoked', { partner_id: id });
      return { ok: true as const, partner_id: id, revoked: true as const };
    }
  );
};
