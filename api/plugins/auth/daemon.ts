/**
 * Model `daemon`: the two factors X-Asset-Id + X-Order-Root (`or<version>_<secret>`), the version matching
 * DAEMON_PROTOCOL_VERSION, checked against the current credential state (store/daemon/assets.ts). Failure is 403
 * identity_check_failed (docs/daemon.md#identity-checks-and-isolation); a failure naming a known asset isolates it
 * (every later request with that asset id is 403 until an administrator releases it), and each failure is a
 * `rejected` line of the audit chain.
 */
import { auditChainFor, sha256Hex } from '../../../core/daemon/audit.node';
import { AppError } from '../../../core/errors';
import { DaemonAssets, orderRootFacts } from '../../../store/daemon/assets';
import { Authenticator, header } from './principal';

export const daemon: Authenticator = async (request, { credentials, config }) => {
  const assetId = header(request, 'x-asset-id');
  const orderRoot = orderRootFacts(header(request, 'x-order-root'));
  const verdict = await new DaemonAssets(credentials.daemonAssets).check(
    assetId,
    orderRoot.hash,
    orderRoot.version,
    config.DAEMON_PROTOCOL_VERSION
  );
  if (verdict.ok) return { model: 'daemon', id: verdict.asset_id };
  const chain = auditChainFor(config.dataDir);
  // Unknown asset ids are recorded by digest only: they are whatever a caller sent.
  const who = verdict.asset_id
    ? { asset_id: verdict.asset_id }
    : { asset_id: null, presented_asset_sha256: assetId ? sha256Hex(assetId) : null };
  try {
    await chain.append({
      event: 'rejected',
      stage: 'admission',
      route: `${request.method} ${request.routeOptions.url ?? request.url}`,
      reason: verdict.reason,
      ...who
    });
    if (verdict.isolated_now && verdict.asset_id)
      await chain.append({ event: 'isolated', asset_id: verdict.asset_id, reason: verdict.reason });
  } catch (err) {
    // A chain that cannot be written (torn last line, disk) must not turn a refusal into anything but a refusal.
    request.log.error({ err }, 'daemon audit chain: could not record a rejected request');
  }
  throw new AppError('identity_check_failed', `Identity check failed: ${verdict.reason}`);
};
