/** Model `admin`: Authorization: Bearer <ADMIN_TOKEN> (compared by digest, in constant time). */
import { digestsEqual, hashSecret } from '../../../core/credentials.node';
import { unauthorized } from '../../../core/errors';
import { Authenticator, bearer } from './principal';

export const admin: Authenticator = async (request, { adminTokenHash }) => {
  const token = bearer(request);
  if (!token || !digestsEqual(adminTokenHash, hashSecret(token))) throw unauthorized('Administrator token required');
  return { model: 'admin', id: 'admin' };
};
