/** Model `oauth`: Authorization: Bearer <access token from POST /v1/oauth/token>, valid, unexpired, unrevoked. */
import { jwtVerify } from 'jose';
import { unauthorized } from '../../../core/errors';
import { AuthDeps, Authenticator, bearer } from './principal';

export const oauth: Authenticator = async (request, deps) => {
  const token = bearer(request);
  if (!token) throw unauthorized('Authorization: Bearer <access token> is required');
  const claims = await verifyAccessToken(token, deps);
  if (!claims) throw unauthorized('Access token is invalid, expired or revoked');
  return { model: 'oauth', id: claims.client_id, scopes: claims.scope ? claims.scope.split(' ') : [] };
};

/** Verifies one of our own access tokens; null when invalid, expired or revoked. */
export async function verifyAccessToken(
  token: string,
  deps: Pick<AuthDeps, 'config' | 'keys' | 'credentials'>
): Promise<{ client_id: string; scope: string; jti: string; exp: number; iat: number } | null> {
  try {
    const { payload } = await jwtVerify(token, deps.keys.publicKey, { issuer: deps.config.publicUrl, algorithms: ['EdDSA'] });
    const jti = payload.jti;
    const clientId = payload.client_id;
    if (typeof jti !== 'string' || typeof clientId !== 'string' || !payload.exp || !payload.iat) return null;
    if (await deps.credentials.isOAuthTokenRevoked(jti)) return null;
    if (!(await deps.credentials.findOAuthClient(clientId))) return null;
    return { client_id: clientId, scope: typeof payload.scope === 'string' ? payload.scope : '', jti, exp: payload.exp, iat: payload.iat };
  } catch {
    return null;
  }
}
