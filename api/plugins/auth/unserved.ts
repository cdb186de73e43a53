/**
 * Models `group_key` and `partner_federation`: declared by the endpoint directory (SPEC §5) for the federated
 * compute and partner groups, whose routes and verifiers are not built yet (`dpop` is served: oauth.ts). Until then no route declares
 * them, and a request under one of them is refused.
 */
import { AppError } from '../../../core/errors';
import type { AuthModel } from '../../../core/endpoint-groups';
import type { Authenticator } from './principal';

export const unserved =
  (model: AuthModel): Authenticator =>
  async () => {
    throw new AppError('unauthorized', `Authentication model ${model} is declared by the directory but no route accepts it yet`);
  };
