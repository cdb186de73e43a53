/** Model `api_key`: Authorization: Bearer zk_<key id>_<secret>, issued by an administrator and not revoked. */
import { API_KEY_PATTERN, digestsEqual, hashSecret } from '../../../core/credentials.node';
import { unauthorized } from '../../../core/errors';
import { Authenticator, bearer } from './principal';

export const apiKey: Authenticator = async (request, { credentials }) => {
  const token = bearer(request);
  const match = token ? API_KEY_PATTERN.exec(token) : null;
  if (!token || !match) throw unauthorized('Authorization: Bearer zk_… API key is required');
  const key = await credentials.findApiKey(match[1]!);
  if (!key || key.revoked_at || !digestsEqual(key.secret_hash, hashSecret(token))) throw unauthorized('API key is invalid or revoked');
  return { model: 'api_key', id: key._id, plan: key.plan };
};
