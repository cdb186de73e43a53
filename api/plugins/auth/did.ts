/** Model `did`: X-DID of a registered, unrevoked DID. */
import { unauthorized } from '../../../core/errors';
import { DID_MAX_LENGTH } from '../../../core/identifiers';
import { Authenticator, header } from './principal';

export const did: Authenticator = async (request, { credentials }) => {
  const value = header(request, 'x-did');
  if (!value) throw unauthorized('X-DID header is required');
  if (value.length > DID_MAX_LENGTH || !(await credentials.activeDid(value))) throw unauthorized('X-DID is not a registered DID');
  return { model: 'did', id: value, did: value };
};
