/**
 * The request and answer schemas of the OAuth routes (api/routes/oauth/index.ts): discovery, JWKS, token,
 * introspection, revocation, key rotation and the DPoP proof check.
 */
import { z } from 'zod';

// grant_type stays a string for validation, so another grant answers RFC 6749's unsupported_grant_type rather than
// a generic validation failure; the document lists the one grant served.
export const tokenBody = z.object({
  grant_type: z
    .string()
    .min(1)
    .max(200)
    .meta({
      enum: ['client_credentials'],
      description: 'only client_credentials (another gives 400 unsupported_grant_type)'
    }),
  scope: z.string().max(1000).optional(),
  client_id: z.string().max(200).optional(),
  client_secret: z.string().max(200).optional()
});

export const tokenParam = z.object({
  token: z.string().min(1).max(8192),
  token_type_hint: z.string().max(100).optional(),
  client_id: z.string().max(200).optional(),
  client_secret: z.string().max(200).optional()
});

/** The RFCs define these bodies as form-urlencoded; JSON is accepted too. */
export const consumes = ['application/x-www-form-urlencoded', 'application/json'];

/** RFC 6749 §5.2 (also RFC 7009 §2.2.1, RFC 9449 §5 and §8). */
const oauthErrorBody = z
  .object({
    error: z
      .string()
      .describe(
        'invalid_request, invalid_client, invalid_grant, unsupported_grant_type, invalid_scope, invalid_dpop_proof, use_dpop_nonce'
      ),
    error_description: z.string()
  })
  .describe('OAuth error (RFC 6749 §5.2)');
export const oauthErrors = {
  400: oauthErrorBody.describe('RFC 6749 §5.2 error; use_dpop_nonce comes with a DPoP-Nonce header'),
  401: oauthErrorBody.describe('invalid_client, with WWW-Authenticate: Basic')
};

/** What this server does, and nothing it does not (RFC 8414 §2; the OIDC discovery document is the same). */
export const discoveryResponse = z.object({
  issuer: z.string(),
  token_endpoint: z.string(),
  introspection_endpoint: z.string(),
  revocation_endpoint: z.string(),
  jwks_uri: z.string(),
  grant_types_supported: z.array(z.string()),
  response_types_supported: z.array(z.string()),
  scopes_supported: z.array(z.string()),
  token_endpoint_auth_methods_supported: z.array(z.string()),
  introspection_endpoint_auth_methods_supported: z.array(z.string()),
  revocation_endpoint_auth_methods_supported: z.array(z.string()),
  dpop_signing_alg_values_supported: z.array(z.string())
});
export const jwksResponse = z.object({ keys: z.array(z.record(z.string(), z.string())) });
export const tokenResponse = z.object({
  access_token: z.string(),
  token_type: z.enum(['Bearer', 'DPoP']),
  expires_in: z.number().int(),
  scope: z.string()
});
export const introspectionResponse = z.object({
  active: z.boolean(),
  client_id: z.string().optional(),
  scope: z.string().optional(),
  token_type: z.enum(['Bearer', 'DPoP']).optional(),
  exp: z.number().int().optional(),
  iat: z.number().int().optional(),
  jti: z.string().optional(),
  iss: z.string().optional(),
  sub: z.string().optional(),
  cnf: z.object({ jkt: z.string() }).optional().describe('RFC 9449 §6.2: the DPoP key the token is bound to')
});
export const revocationResponse = z.object({ ok: z.literal(true), revoked: z.boolean() });
export const rotationResponse = z.object({
  ok: z.literal(true),
  kid: z.string(),
  retired: z.string(),
  retired_verify_until: z.string()
});

export const dpopVerifyBody = z.object({
  proof: z.string().min(1).max(8192).describe('the DPoP proof JWT'),
  htm: z
    .string()
    .min(1)
    .max(16)
    .regex(/^[A-Z]+$/)
    .describe('the HTTP method the proof is for'),
  htu: z.string().min(1).max(2048).describe('the HTTP URL the proof is for (query and fragment ignored)'),
  access_token: z.string().min(1).max(8192).optional().describe('when given, the proof must carry ath = its SHA-256')
});
export const dpopVerifyResponse = z.object({
  valid: z.boolean(),
  jkt: z.string().optional().describe('RFC 7638 thumbprint of the proof key'),
  jti: z.string().optional(),
  check: z
    .enum(['jwt', 'typ', 'alg', 'jwk', 'signature', 'claims', 'htm', 'htu', 'iat', 'ath', 'nonce', 'jti'])
    .optional()
    .describe('the first RFC 9449 §4.3 check that failed'),
  error: z.enum(['invalid_dpop_proof', 'use_dpop_nonce']).optional(),
  message: z.string().optional()
});
