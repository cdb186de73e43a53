/**
 * Partner channels (capability `partner`, directory group kunlun_federation, auth `partner_federation`):
 *   POST /v1/federated/kunlun   a signed operation in clear JSON, answered in clear JSON
 *   POST /v1/kunlun/secure      the same operations inside an X25519 + HKDF-SHA-256 + AES-256-GCM envelope to the
 *                               hub's key-agreement key, answered inside an envelope (core/partner/envelope.node.ts)
 * Mutual authentication: the partner signs each request (RFC 9421, api/plugins/auth/partner.ts); the hub signs each
 * answer with its Ed25519 signing key (the handshake's `signing_key`, keyid = its kid) over `@status` and
 * `content-digest`, with `nonce` = the base64url SHA-256 of the request's signature, so an answer cannot be
 * replayed onto another request. Operations (`op`): hello, echo, ledger_head, ledger_entries (README "Partner
 * channels" has a worked example).
 */
import type { FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Config } from '../../../core/config.node';
import { AppError, unauthorized } from '../../../core/errors';
import { humanText } from '../../../core/identifiers';
import { publicEntry, publicEntrySchema } from '../../../core/ledger/ledger-entry';
import { ENVELOPE_ALG, ENVELOPE_VERSION, EnvelopeError, openRequest } from '../../../core/partner/envelope.node';
import { contentDigest, contentDigestMatches, signMessage } from '../../../core/partner/http-signature.node';
import type { Ledger } from '../../../store/ledger/ledger';
import type { PartnerStore } from '../../../store/partner/partners';
import type { HubKeys } from '../../keys';
import { partnerSignatureOf } from '../../plugins/auth/partner';
import { parseJsonBody, stringifyJson } from '../../plugins/json-body';

const BODY_LIMIT = 64 * 1024;
const MAX_ENTRIES = 100;

const operation = z.discriminatedUnion('op', [
  z.object({ op: z.literal('hello') }).strict(),
  z.object({ op: z.literal('echo'), message: humanText(4096, { multiline: true }) }).strict(),
  z.object({ op: z.literal('ledger_head') }).strict(),
  z
    .object({
      op: z.literal('ledger_entries'),
      after: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).default(0),
      limit: z.number().int().min(1).max(MAX_ENTRIES).default(20)
    })
    .strict()
]);
type Operation = z.infer<typeof operation>;

const b64url = (what: string, max: number) =>
  z
    .string()
    .max(max)
    .regex(/^[A-Za-z0-9_-]+$/, `${what}, base64url without padding`);
const requestEnvelope = z
  .object({
    v: z.literal(ENVELOPE_VERSION),
    alg: z.literal(ENVELOPE_ALG),
    epk: b64url("the partner's ephemeral X25519 public key (32 bytes)", 43),
    iv: b64url('12-byte AES-GCM iv', 16),
    ciphertext: b64url(
      'AES-256-GCM ciphertext followed by the 16-byte tag; the plaintext is one operation as JSON',
      48 * 1024
    )
  })
  .strict();
const responseEnvelope = z.object({
  ok: z.literal(true),
  v: z.literal(ENVELOPE_VERSION),
  alg: z.literal(ENVELOPE_ALG),
  iv: z.string(),
  ciphertext: z
    .string()
    .describe('the answer (as /v1/federated/kunlun gives it) as JSON, encrypted under the response key')
});

const answer = z.union([
  z.object({
    ok: z.literal(true),
    op: z.literal('hello'),
    partner_id: z.string(),
    partner_name: z.string(),
    hub: z.object({ did: z.string(), kid: z.string(), key_agreement_kid: z.string() }),
    time: z.string()
  }),
  z.object({ ok: z.literal(true), op: z.literal('echo'), partner_id: z.string(), message: z.string() }),
  z.object({ ok: z.literal(true), op: z.literal('ledger_head'), size: z.number().int(), root: z.string() }),
  z.object({
    ok: z.literal(true),
    op: z.literal('ledger_entries'),
    after: z.number().int(),
    next_cursor: z.number().int(),
    entries: z.array(publicEntrySchema)
  })
]);

/** The raw bytes of each request body (Content-Digest is checked against them). */
const rawBodies = new WeakMap<FastifyRequest, Buffer>();

export const kunlunRoutes: FastifyPluginAsyncZod<{
  config: Config;
  keys: HubKeys;
  ledger: Ledger;
  partners: PartnerStore;
}> = async (app, { config, keys, ledger, partners }) => {
  // JSON parsed as everywhere else (strict JSON, depth limit), keeping the bytes for the digest check.
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser(
    'application/json',
    { parseAs: 'buffer', bodyLimit: BODY_LIMIT },
    (request, body: Buffer, done) => {
      rawBodies.set(request, body);
      try {
        done(null, parseJsonBody(body, request.headers['content-type'], config.JSON_MAX_DEPTH));
      } catch (err) {
        done(err as Error, undefined);
      }
    }
  );

  // The body must be the one the partner signed (the signature covers Content-Digest; the digest covers the body).
  app.addHook('preValidation', async (request) => {
    const field = request.headers['content-digest'];
    if (typeof field !== 'string' || !contentDigestMatches(field, rawBodies.get(request) ?? Buffer.alloc(0))) {
      throw unauthorized('Content-Digest does not match the body (sha-256 or sha-512, RFC 9530)');
    }
  });

  // Every answer, refusals included, is signed by the hub: the partner authenticates the hub as well.
  app.addHook('onSend', async (request, reply, payload) => {
    if (typeof payload !== 'string' && !Buffer.isBuffer(payload)) return payload;
    const digest = contentDigest(payload);
    const bound = partnerSignatureOf(request);
    const params: [string, string | number][] = [
      ['created', Math.floor(Date.now() / 1000)],
      ['keyid', keys.kid],
      ['alg', 'ed25519'],
      ['tag', 'zhongshu-hub-response']
    ];
    if (bound) params.push(['nonce', bound.digest]);
    const signed = signMessage(
      'hub',
      { components: ['@status', 'content-digest'], params },
      { status: reply.statusCode, headers: { 'content-digest': digest } },
      keys.privateKey
    );
    reply.header('Content-Digest', digest);
    reply.header('Signature-Input', signed.signatureInput);
    reply.header('Signature', signed.signature);
    return payload;
  });

  const run = async (request: FastifyRequest, op: Operation) => {
    const partnerId = request.principal!.id;
    switch (op.op) {
      case 'hello': {
        const partner = await partners.find(partnerId);
        return {
          ok: true as const,
          op: op.op,
          partner_id: partnerId,
          partner_name: partner?.name ?? partnerId,
          hub: { did: config.SERVICE_DID, kid: keys.kid, key_agreement_kid: keys.keyAgreement.jwk.kid! },
          time: new Date().toISOString()
        };
      }
      case 'echo':
        return { ok: true as const, op: op.op, partner_id: partnerId, message: op.message };
      case 'ledger_head': {
        const head = await ledger.head();
        return { ok: true as const, op: op.op, size: head.size, root: head.root };
      }
      case 'ledger_entries': {
        const entries = (await ledger.after(op.after, op.limit)).map(publicEntry);
        return {
          ok: true as const,
          op: op.op,
          after: op.after,
          next_cursor: entries.length ? entries[entries.length - 1]!.seq : op.after,
          entries
        };
      }
    }
  };

  app.post(
    '/v1/federated/kunlun',
    {
      bodyLimit: BODY_LIMIT,
      config: {
        auth: 'partner_federation',
        directory: {
          group: 'kunlun_federation',
          summary: 'Partner federation access: a signed operation (RFC 9421), answered signed by the hub',
          publicRead: false
        }
      },
      schema: { body: operation, response: { 200: answer } }
    },
    async (request) => run(request, request.body)
  );

  app.post(
    '/v1/kunlun/secure',
    {
      bodyLimit: BODY_LIMIT,
      config: {
        auth: 'partner_federation',
        directory: {
          group: 'kunlun_federation',
          summary: 'Partner secure channel: an operation in an X25519 + HKDF + AES-GCM envelope, answered encrypted',
          publicRead: false
        }
      },
      schema: { body: requestEnvelope, response: { 200: responseEnvelope } }
    },
    async (request) => {
      const partnerId = request.principal!.id;
      let opened: ReturnType<typeof openRequest>;
      try {
        opened = openRequest(request.body, partnerId, keys.keyAgreement);
      } catch (err) {
        if (err instanceof EnvelopeError) throw new AppError('invalid_request', err.message);
        throw err;
      }
      let inner: unknown;
      try {
        inner = parseJsonBody(opened.plaintext, 'application/json', config.JSON_MAX_DEPTH);
      } catch {
        throw new AppError('invalid_request', 'the decrypted plaintext is not one JSON operation');
      }
      const parsed = operation.safeParse(inner);
      if (!parsed.success) {
        throw new AppError('invalid_request', 'the decrypted operation is invalid', {
          fields: parsed.error.issues.map((i) => ({ field: `plaintext.${i.path.join('.')}`, message: i.message }))
        });
      }
      const result = await run(request, parsed.data);
      const sealed = opened.sealResponse(Buffer.from(stringifyJson(result), 'utf8'));
      return {
        ok: true as const,
        v: ENVELOPE_VERSION,
        alg: ENVELOPE_ALG,
        iv: sealed.iv,
        ciphertext: sealed.ciphertext
      };
    }
  );
};
