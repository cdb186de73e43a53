/**
 * Model `oauth_client`: OAuth client authentication (RFC 6749 §2.3.1): HTTP Basic, or client_id + client_secret in
 * the form body. It runs after the body is parsed (see index.ts).
 */
import { digestsEqual, hashSecret } from '../../../core/credentials.node';
import { AppError } from '../../../core/errors';
import { Authenticator, header } from './principal';

export const oauthClient: Authenticator = async (request, { credentials }) => {
  let clientId: string | undefined;
  let clientSecret: string | undefined;
  const authz = header(request, 'authorization');
  const basic = authz ? /^Basic\s+(\S+)$/i.exec(authz) : null;
  if (basic) {
    const decoded = Buffer.from(basic[1]!, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon > 0) {
      try {
        clientId = decodeURIComponent(decoded.slice(0, colon));
        clientSecret = decodeURIComponent(decoded.slice(colon + 1));
      } catch {
        // Malformed percent-encoding: no credentials.
      }
    }
  } else {
    // Not validated yet (this runs before validation): read the two fields only if they are strings.
    const body: unknown = request.body;
    const field = (name: string) =>
      body && typeof body === 'object' && name in body ? (body as Record<string, unknown>)[name] : undefined;
    const id = field('client_id');
    const secret = field('client_secret');
    if (typeof id === 'string') clientId = id;
    if (typeof secret === 'string') clientSecret = secret;
  }
  const fail = new AppError(
    'invalid_client',
    'Client authentication failed',
    { error_description: 'unknown client or wrong secret' },
    { 'WWW-Authenticate': 'Basic realm="oauth"' }
  );
  if (!clientId || !clientSecret) throw fail;
  const client = await credentials.findOAuthClient(clientId);
  if (!client || !digestsEqual(client.secret_hash, hashSecret(clientSecret))) throw fail;
  return { model: 'oauth_client', id: client._id, scopes: client.scopes };
};
