/**
 * Issuing and revoking the first credentials (the administrator's routes, api/routes/admin/index.ts): DIDs,
 * homologous tokens, API keys, OAuth clients and daemon assets. Each secret is answered once and stored only as a
 * digest; every issue and revoke is recorded in the ledger as a `hub.admin.*` event (without the secret) so it stays
 * traceable.
 */
import { randomBytes } from 'node:crypto';
import type { Config, DaemonConfig, ServiceConfig } from '../../core/config.node';
import { AppError, notFound } from '../../core/errors';
import type { CredentialStore } from '../../store/credentials';
import type { Ledger } from '../../store/ledger/ledger';

export interface CredentialAdminDeps {
  credentials: CredentialStore;
  ledger: Ledger;
  config: Pick<ServiceConfig, 'SERVICE_DID'> &
    Pick<DaemonConfig, 'DAEMON_PROTOCOL_VERSION'> &
    Pick<Config, 'publicUrl'>;
}

export function createCredentialAdmin({ credentials, ledger, config }: CredentialAdminDeps) {
  const record = (action: string, value: Record<string, string | number | boolean | null>) =>
    ledger.append({ kind: 'event', key: `hub.admin.${action}`, value, did: config.SERVICE_DID, truth_type: 'config' });

  /** Registers `did` (or a new one); `created` false when it was registered already. A revoked DID is 409. */
  async function registerDid(requested: string | undefined, label: string | null) {
    const did = requested ?? `did:zhongshu:${randomBytes(10).toString('hex')}`;
    const { did: doc, created } = await credentials.registerDid(did, label);
    if (doc.revoked_at) throw new AppError('conflict', `DID ${did} was revoked; register a new one`);
    if (created) await record('did_registered', { did, label: doc.label ?? null });
    return { ok: true as const, did, label: doc.label ?? null, created, created_at: doc.created_at };
  }

  async function revokeDid(did: string) {
    if (!(await credentials.revokeDid(did))) throw notFound(`No active DID ${did}`);
    await record('did_revoked', { did });
    return { ok: true as const, did, revoked: true as const };
  }

  async function issueHomologousToken(label: string | null, did: string | null) {
    if (did && !(await credentials.activeDid(did))) {
      throw new AppError('invalid_request', `DID ${did} is not registered; POST /admin/dids first`, {
        fields: [{ field: 'body.did', message: 'not a registered DID' }]
      });
    }
    const { token, doc } = await credentials.issueHomologousToken(label, did);
    await record('homologous_token_issued', { token_id: doc.token_id, did: doc.did, label: doc.label });
    return {
      ok: true as const,
      token_id: doc.token_id,
      token,
      did: doc.did,
      usage: doc.did ? 'headers X-DID and X-Capture-Token' : 'header X-ZR-Token',
      note: 'Shown once; only its digest is stored.'
    };
  }

  async function revokeHomologousToken(tokenId: string) {
    if (!(await credentials.revokeHomologousToken(tokenId))) throw notFound(`No active homologous token ${tokenId}`);
    await record('homologous_token_revoked', { token_id: tokenId });
    return { ok: true as const, token_id: tokenId, revoked: true as const };
  }

  async function issueApiKey(label: string | null, plan: string) {
    const { apiKey, doc } = await credentials.issueApiKey(label, plan);
    await record('api_key_issued', { key_id: doc._id, plan: doc.plan, label: doc.label });
    return {
      ok: true as const,
      key_id: doc._id,
      api_key: apiKey,
      plan: doc.plan,
      note: 'Shown once; only its digest is stored. Server-side use only.'
    };
  }

  async function revokeApiKey(keyId: string) {
    const doc = await credentials.revokeApiKey(keyId);
    if (!doc) throw notFound(`No API key ${keyId}`);
    await record('api_key_revoked', { key_id: keyId });
    return { ok: true as const, key_id: keyId, revoked: true as const, revoked_at: doc.revoked_at };
  }

  async function regenerateApiKey(keyId: string) {
    const res = await credentials.regenerateApiKey(keyId);
    if (!res) throw notFound(`No API key ${keyId}`);
    await record('api_key_regenerated', { key_id: keyId });
    return { ok: true as const, key_id: keyId, api_key: res.apiKey, note: 'The previous secret no longer works.' };
  }

  async function issueOAuthClient(label: string | null, scopes: string[]) {
    const { clientSecret, doc } = await credentials.issueOAuthClient(label, scopes);
    await record('oauth_client_issued', { client_id: doc._id, label: doc.label });
    return {
      ok: true as const,
      client_id: doc._id,
      client_secret: clientSecret,
      scopes: doc.scopes,
      token_endpoint: `${config.publicUrl}/v1/oauth/token`
    };
  }

  async function issueDaemonAsset(label: string | null) {
    const { orderRoot, doc } = await credentials.issueDaemonAsset(label, config.DAEMON_PROTOCOL_VERSION);
    await record('daemon_asset_issued', { asset_id: doc._id, version: doc.version });
    return {
      ok: true as const,
      asset_id: doc._id,
      order_root: orderRoot,
      version: doc.version,
      usage: 'headers X-Asset-Id and X-Order-Root on the daemon'
    };
  }

  return {
    registerDid,
    revokeDid,
    issueHomologousToken,
    revokeHomologousToken,
    issueApiKey,
    revokeApiKey,
    regenerateApiKey,
    issueOAuthClient,
    issueDaemonAsset
  };
}
