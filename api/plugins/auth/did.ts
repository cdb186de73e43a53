/** Model `did`: X-DID of a registered, unrevoked DID. */
import { unauthorized } from '../../../core/errors';
import { Authenticator, header } from './principal';

export const did: Authenticator = async (request, { credentials }) => {
  const value = header(request, 'x-did');
  if (!value) throw unauthorized('X-DID header is required');
  if (!(await credentials.activeDid(value))) throw unauthorized('X-DID is not a registered DID');
  return { model: 'did', id: value, did: value };
};
