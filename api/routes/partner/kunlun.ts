/**
 * Partner channels (capability `partner`, directory group kunlun_federation, auth `partner_federation`):
 *   POST /v1/federated/kunlun   a signed operation in clear JSON, answered in clear JSON
 *   POST /v1/kunlun/secure      the same operations inside an X25519 + HKDF-SHA-256 + AES-256-GCM envelope to the
 *                               hub's key-agreement key, answered inside an envelope (core/partner/envelope.node.ts)
 * Mutual authentication: the partner signs each request (RFC 9421, api/plugins/auth/partner.ts); the hub signs each
 * answer with its Ed25519 signing key (the handshake's `signing_key`, keyid = its kid) over `@status` and
 * `content-digest`, with `nonce` = the base64url SHA-256 of the request's signature, so an answer cannot be
 * replayed onto another request. Operations (`op`): hello, echo, ledger_head, ledger_entries (docs/partner.md has a
 * worked example).
 */
import type { FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { ListenerConfig, ServiceConfig } from '../../../core/config.node';
import { AppError, unauthorized } from '../../../core/errors';
import { ENVELOPE_ALG, ENVELOPE_VERSION } from '../../../core/partner/envelope.node';
import { contentDigest, contentDigestMatches, signMessage } from '../../../core/partner/http-signature.node';
import type { Ledger } from '../../../store/ledger/ledger';
import type { PartnerStore } from '../../../store/partner/partners';
import type { HubKeys } from '../../../store/keys/hub-keys';
import { partnerSignatureOf } from '../../plugins/auth/partner';
import { createKunlunOperations } from '../../../services/partner/kunlun-operations';
import { parseJsonBody, stringifyJson } from '../../plugins/json-body';
import { answer, operation, requestEnvelope, responseEnvelope } from './kunlun.schema';

const BODY_LIMIT = 64 * 1024;

/** The raw bytes of each request body (Content-Digest is checked against them). */
const rawBodies = new WeakMap<FastifyRequest, Buffer>();

export const kunlunRoutes: FastifyPluginAsyncZod<{
  config: Pick<ServiceConfig, 'SERVICE_DID'> & Pick<ListenerConfig, 'JSON_MAX_DEPTH'>;
  keys: HubKeys;
  ledger: Ledger;
  partners: PartnerStore;
}> = async (app, deps) => {
  const { config, keys } = deps;
  const operations = createKunlunOperations(deps);
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
    async (request) => operations.run(request.principal!.id, request.body)
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
      const opened = operations.openEnvelope(request.body, partnerId);
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
      const result = await operations.run(partnerId, parsed.data);
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
