/**
 * Model `daemon`: the two factors X-Asset-Id + X-Order-Root (`or<version>_<secret>`), the version matching
 * DAEMON_PROTOCOL_VERSION. Failure is 403 identity_check_failed, as the spec asks.
 */
import { digestsEqual, hashSecret } from '../../../core/credentials.node';
import { AppError } from '../../../core/errors';
import { Authenticator, header } from './principal';

export const daemon: Authenticator = async (request, { credentials, config }) => {
  const assetId = header(request, 'x-asset-id');
  const orderRoot = header(request, 'x-order-root');
  const fail = (why: string) => new AppError('identity_check_failed', `Identity check failed: ${why}`);
  if (!assetId || !orderRoot) throw fail('X-Asset-Id and X-Order-Root are both required');
  const version = /^or(\d+)_/.exec(orderRoot)?.[1];
  const asset = await credentials.findDaemonAsset(assetId);
  if (!asset || !digestsEqual(asset.order_root_hash, hashSecret(orderRoot))) throw fail('unknown asset or forged order root');
  if (Number(version) !== config.DAEMON_PROTOCOL_VERSION || asset.version !== config.DAEMON_PROTOCOL_VERSION) {
    throw fail(`order root version ${version} does not match protocol version ${config.DAEMON_PROTOCOL_VERSION}`);
  }
  return { model: 'daemon', id: asset._id };
};
