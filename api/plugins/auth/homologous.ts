/** Model `homologous`: X-ZR-Token, or X-DID with an X-Capture-Token issued to that (registered) DID. */
import { unauthorized } from '../../../core/errors';
import { Authenticator, header } from './principal';

export const homologous: Authenticator = async (request, { credentials }) => {
  const zr = header(request, 'x-zr-token');
  if (zr) {
    const token = await credentials.findHomologousToken(zr);
    if (token && !token.did) return { model: 'homologous', id: token.token_id };
    throw unauthorized('Unknown or revoked X-ZR-Token');
  }
  const did = header(request, 'x-did');
  const capture = header(request, 'x-capture-token');
  if (did && capture) {
    const token = await credentials.findHomologousToken(capture);
    if (token && token.did === did && (await credentials.activeDid(did)))
      return { model: 'homologous', id: token.token_id, did };
    throw unauthorized('X-Capture-Token is unknown, revoked or not issued to this X-DID');
  }
  throw unauthorized('Send X-ZR-Token, or X-DID together with X-Capture-Token');
};
