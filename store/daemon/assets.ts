/**
 * The daemon's two-factor identity check against the current credential state, and asset isolation. The state
 * lives on the daemon_assets documents the admin API issues (store/credentials.ts): `revoked_at`, and here
 * `isolated_at` / `isolation_reason`. An isolated asset fails every check until an administrator releases it
 * (POST /admin/daemon-assets/<id>/release, `npm run admin -- daemon-release <id>`). Used by the `daemon` auth model
 * before admission and by the daemon-dag workflow's activity right before each task's model call.
 */
import type { Collection } from 'mongodb';
import { digestsEqual, hashSecret } from '../../core/credentials.node';
import type { DaemonAssetDocument } from '../credentials';

export interface DaemonAssetState extends DaemonAssetDocument {
  isolated_at?: string | null;
  isolation_reason?: string | null;
}

export type IdentityVerdict =
  { ok: true; asset_id: string } | { ok: false; reason: string; asset_id: string | null; isolated_now: boolean };

export const ASSET_ID_PATTERN = /^asset_[A-Za-z0-9_-]{1,80}$/;

export class DaemonAssets {
  constructor(private readonly assets: Collection<DaemonAssetDocument>) {}

  private get col(): Collection<DaemonAssetState> {
    return this.assets as unknown as Collection<DaemonAssetState>;
  }

  find(assetId: string): Promise<DaemonAssetState | null> {
    return this.col.findOne({ _id: assetId });
  }

  /**
   * Checks the two factors. `orderRootHash` is the SHA-256 of the presented order root (the workflow carries only
   * the digest, never the secret), `version` the version the order root claims. A failure with a known asset id
   * isolates that asset.
   */
  async check(
    assetId: string | undefined,
    orderRootHash: string | undefined,
    version: number | null,
    protocolVersion: number
  ): Promise<IdentityVerdict> {
    if (!assetId)
      return {
        ok: false,
        reason: 'X-Asset-Id and X-Order-Root are both required',
        asset_id: null,
        isolated_now: false
      };
    const asset = ASSET_ID_PATTERN.test(assetId) ? await this.find(assetId) : null;
    const fail = async (reason: string): Promise<IdentityVerdict> => {
      if (!asset) return { ok: false, reason, asset_id: null, isolated_now: false };
      const isolatedNow = await this.isolate(asset._id, reason);
      return { ok: false, reason, asset_id: asset._id, isolated_now: isolatedNow };
    };
    if (asset?.isolated_at)
      return {
        ok: false,
        reason: `asset ${asset._id} is isolated since ${asset.isolated_at} (${asset.isolation_reason ?? 'identity check failed'}); an administrator must release it`,
        asset_id: asset._id,
        isolated_now: false
      };
    if (!orderRootHash) return fail('X-Asset-Id and X-Order-Root are both required');
    if (!asset) return fail('unknown asset or forged order root');
    if (asset.revoked_at) return fail(`asset ${asset._id} was revoked at ${asset.revoked_at}`);
    if (!digestsEqual(asset.order_root_hash, orderRootHash)) return fail('unknown asset or forged order root');
    if (version !== protocolVersion || asset.version !== protocolVersion)
      return fail(`order root version ${version ?? 'none'} does not match protocol version ${protocolVersion}`);
    return { ok: true, asset_id: asset._id };
  }

  /** Isolates the asset; true when this call isolated it (false: it already was). */
  async isolate(assetId: string, reason: string): Promise<boolean> {
    const res = await this.col.updateOne(
      { _id: assetId, isolated_at: null },
      { $set: { isolated_at: new Date().toISOString(), isolation_reason: reason.slice(0, 300) } }
    );
    return res.modifiedCount === 1;
  }

  /** Lifts an isolation; false when the asset does not exist or was not isolated. */
  async release(assetId: string): Promise<boolean> {
    const res = await this.col.updateOne(
      { _id: assetId, isolated_at: { $type: 'string' } },
      { $set: { isolated_at: null, isolation_reason: null } }
    );
    return res.modifiedCount === 1;
  }

  /** Revokes the asset for good; false when unknown or already revoked. */
  async revoke(assetId: string): Promise<boolean> {
    const res = await this.col.updateOne(
      { _id: assetId, revoked_at: null },
      { $set: { revoked_at: new Date().toISOString() } }
    );
    return res.modifiedCount === 1;
  }
}

/** The parts of the presented order root the checks need: its digest and the version it claims (`or<version>_`). */
export function orderRootFacts(orderRoot: string | undefined): { hash: string | undefined; version: number | null } {
  if (!orderRoot) return { hash: undefined, version: null };
  const v = /^or(\d{1,9})_/.exec(orderRoot)?.[1];
  return { hash: hashSecret(orderRoot), version: v === undefined ? null : Number(v) };
}
