/** OAuth request bodies as application/x-www-form-urlencoded, as RFC 6749 defines them. */
import { AppError } from '../../../core/errors';

/** The parameters the OAuth endpoints read (token, introspection, revocation). */
const OAUTH_PARAMETERS = new Set(['grant_type', 'scope', 'client_id', 'client_secret', 'token', 'token_type_hint']);

/**
 * A form body as an object, the RFC 6749 way (§3.1, §3.2): unrecognized parameters are ignored, a parameter sent
 * without a value counts as omitted, and a recognized parameter sent twice is refused.
 */
export function parseForm(body: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of new URLSearchParams(body)) {
    if (!OAUTH_PARAMETERS.has(name) || value === '') continue;
    if (Object.hasOwn(out, name)) {
      throw new AppError('invalid_request', `Parameter ${name} appears more than once (RFC 6749 §3.2)`, {
        fields: [{ field: `body.${name}`, message: 'repeated' }]
      });
    }
    out[name] = value;
  }
  return out;
}
