/**
 * Credentials the hub issues (DIDs, homologous tokens, zk_ API keys, OAuth clients, daemon assets) and looks up
 * when a request authenticates. Secrets are stored only as SHA-256 digests (core/credentials.node.ts) and are
 * returned once, at issue time, by the functions that create them.
 */
import { Collection, Db } from 'mongodb';
import { hashSecret, newApiKey, newId, newSecret } from '../core/credentials.node';
import { ActiveDids, recordDidRevocation } from './active-dids';
import { forgetApiKey } from './verified-api-keys';
import { isDuplicateKey } from './mongo';

export interface DidDocument {
  _id: string;
  label: string | null;
  created_at: string;
  revoked_at: string | null;
  /** The node the DID is linked to (did_register, store/deploy/registry.ts): X-DID alone authenticates as it. */
  node_id?: string | null;
}

export interface HomologousTokenDocument {
  /** SHA-256 of the token. */
  _id: string;
  token_id: string;
  label: string | null;
  /** When set, the token is a capture token: valid only together with this X-DID. */
  did: string | null;
  created_at: string;
  revoked_at: string | null;
}

export interface ApiKeyDocument {
  _id: string; // key id (public part of zk_<id>_<secret>)
  secret_hash: string;
  label: string | null;
  plan: string;
  created_at: string;
  regenerated_at: string | null;
  revoked_at: string | null;
}

export interface OAuthClientDocument {
  _id: string; // client_id
  secret_hash: string;
  label: string | null;
  scopes: string[];
  created_at: string;
  revoked_at: string | null;
}

export interface OAuthRevocationDocument {
  _id: string; // jti
  revoked_at: string;
  expires_at: string;
}

/** A DPoP proof seen (RFC 9449 §11.1): _id = SHA-256 of key thumbprint + jti; kept until its iat window ends. */
export interface DpopJtiDocument {
  _id: string;
  expires_at: Date;
}

/** A server-issued DPoP nonce (RFC 9449 §8), valid until expires_at. */
export interface DpopNonceDocument {
  _id: string;
  expires_at: Date;
}

export interface DaemonAssetDocument {
  _id: string; // asset id
  order_root_hash: string;
  version: number;
  label: string | null;
  created_at: string;
  revoked_at: string | null;
}

const now = () => new Date().toISOString();

export class CredentialStore {
  readonly dids: Collection<DidDocument>;
  readonly homologousTokens: Collection<HomologousTokenDocument>;
  readonly apiKeys: Collection<ApiKeyDocument>;
  readonly oauthClients: Collection<OAuthClientDocument>;
  readonly oauthRevocations: Collection<OAuthRevocationDocument>;
  readonly daemonAssets: Collection<DaemonAssetDocument>;
  readonly dpopJtis: Collection<DpopJtiDocument>;
  readonly dpopNonces: Collection<DpopNonceDocument>;
  /** The DIDs this process found active lately: the truth write's X-DID check (store/active-dids.ts). */
  readonly activeDids: ActiveDids;

  constructor(private readonly db: Db) {
    this.dids = db.collection('dids');
    this.activeDids = new ActiveDids(db, async (did) => (await this.activeDid(did)) !== null);
    this.homologousTokens = db.collection('homologous_tokens');
    this.apiKeys = db.collection('api_keys');
    this.oauthClients = db.collection('oauth_clients');
    this.oauthRevocations = db.collection('oauth_revocations');
    this.daemonAssets = db.collection('daemon_assets');
    this.dpopJtis = db.collection('dpop_jtis');
    this.dpopNonces = db.collection('dpop_nonces');
  }

  // ---- DPoP replay store and server nonces: in MongoDB, so every API process sees the same. _id is the unique
  // key; FerretDB has no TTL indexes, so expired records are pruned here (at most once a minute per process) and
  // every read compares expires_at, so correctness never waits for a prune ----

  private prunedAt = 0;

  private pruneDpop(): void {
    const now = Date.now();
    if (now - this.prunedAt < 60_000) return;
    this.prunedAt = now;
    const expired = { expires_at: { $lte: new Date(now) } };
    // Best effort and off the request path: a failed prune is retried a minute later.
    void Promise.all([this.dpopJtis.deleteMany(expired), this.dpopNonces.deleteMany(expired)]).catch(() => {
      this.prunedAt = 0;
    });
  }

  /** Records a proof's jti; false when it is already recorded and unexpired (a replay). */
  async rememberDpopJti(id: string, expiresAt: Date): Promise<boolean> {
    this.pruneDpop();
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        await this.dpopJtis.insertOne({ _id: id, expires_at: expiresAt });
        return true;
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
        // Taken: a replay, unless the record outlived its window and the TTL monitor has not removed it yet.
        const removed = await this.dpopJtis.deleteOne({ _id: id, expires_at: { $lte: new Date() } });
        if (removed.deletedCount === 0) return false;
      }
    }
    return false;
  }

  async issueDpopNonce(ttlS: number): Promise<string> {
    const nonce = newSecret('dn_');
    await this.dpopNonces.insertOne({ _id: nonce, expires_at: new Date(Date.now() + ttlS * 1000) });
    return nonce;
  }

  async dpopNonceValid(nonce: string): Promise<boolean> {
    if (nonce.length > 128) return false;
    return (await this.dpopNonces.countDocuments({ _id: nonce, expires_at: { $gt: new Date() } }, { limit: 1 })) > 0;
  }

  // ---- DIDs (an identity, not a secret: X-DID alone authenticates a registered, unrevoked DID) ----

  /** Registers a DID; registering one that exists is idempotent and returns `created: false`. */
  async registerDid(did: string, label: string | null): Promise<{ did: DidDocument; created: boolean }> {
    const doc: DidDocument = { _id: did, label, created_at: now(), revoked_at: null };
    const res = await this.dids.updateOne({ _id: did }, { $setOnInsert: doc }, { upsert: true });
    const stored = (await this.dids.findOne({ _id: did }))!;
    return { did: stored, created: res.upsertedCount === 1 };
  }

  async activeDid(did: string): Promise<DidDocument | null> {
    return this.dids.findOne({ _id: did, revoked_at: null });
  }

  async revokeDid(did: string): Promise<boolean> {
    await recordDidRevocation(this.db, did); // before the update: other processes find it (store/active-dids.ts)
    const res = await this.dids.updateOne({ _id: did, revoked_at: null }, { $set: { revoked_at: now() } });
    this.activeDids.forget(did); // after the update: a read that began before it is not remembered
    return res.modifiedCount === 1;
  }

  // ---- homologous tokens (X-ZR-Token, or X-DID + X-Capture-Token) ----

  async issueHomologousToken(
    label: string | null,
    did: string | null
  ): Promise<{ token: string; doc: HomologousTokenDocument }> {
    const token = newSecret('zr_');
    const doc: HomologousTokenDocument = {
      _id: hashSecret(token),
      token_id: newId('hom_'),
      label,
      did,
      created_at: now(),
      revoked_at: null
    };
    await this.homologousTokens.insertOne(doc);
    return { token, doc };
  }

  findHomologousToken(token: string): Promise<HomologousTokenDocument | null> {
    return this.homologousTokens.findOne({ _id: hashSecret(token), revoked_at: null });
  }

  async revokeHomologousToken(tokenId: string): Promise<boolean> {
    const res = await this.homologousTokens.updateOne(
      { token_id: tokenId, revoked_at: null },
      { $set: { revoked_at: now() } }
    );
    return res.modifiedCount === 1;
  }

  // ---- zk_ API keys (chat gateway) ----

  async issueApiKey(label: string | null, plan: string): Promise<{ apiKey: string; doc: ApiKeyDocument }> {
    const id = newId('').slice(0, 16);
    const apiKey = newApiKey(id);
    const doc: ApiKeyDocument = {
      _id: id,
      secret_hash: hashSecret(apiKey),
      label,
      plan,
      created_at: now(),
      regenerated_at: null,
      revoked_at: null
    };
    await this.apiKeys.insertOne(doc);
    return { apiKey, doc };
  }

  findApiKey(keyId: string): Promise<ApiKeyDocument | null> {
    return this.apiKeys.findOne({ _id: keyId });
  }

  async revokeApiKey(keyId: string): Promise<ApiKeyDocument | null> {
    await this.apiKeys.updateOne({ _id: keyId, revoked_at: null }, { $set: { revoked_at: now() } });
    forgetApiKey(keyId); // after the update: a read that began before it is not remembered (store/verified-api-keys.ts)
    return this.apiKeys.findOne({ _id: keyId });
  }

  /** A new secret for the same key id (the old one stops working at once); also lifts a revocation. */
  async regenerateApiKey(keyId: string): Promise<{ apiKey: string; doc: ApiKeyDocument } | null> {
    const apiKey = newApiKey(keyId);
    const res = await this.apiKeys.findOneAndUpdate(
      { _id: keyId },
      { $set: { secret_hash: hashSecret(apiKey), regenerated_at: now(), revoked_at: null } },
      { returnDocument: 'after' }
    );
    forgetApiKey(keyId);
    return res ? { apiKey, doc: res } : null;
  }

  // ---- OAuth clients (client credentials flow) and revoked token ids ----

  async issueOAuthClient(
    label: string | null,
    scopes: string[]
  ): Promise<{ clientSecret: string; doc: OAuthClientDocument }> {
    const clientSecret = newSecret('cs_');
    const doc: OAuthClientDocument = {
      _id: newId('client_'),
      secret_hash: hashSecret(clientSecret),
      label,
      scopes,
      created_at: now(),
      revoked_at: null
    };
    await this.oauthClients.insertOne(doc);
    return { clientSecret, doc };
  }

  findOAuthClient(clientId: string): Promise<OAuthClientDocument | null> {
    return this.oauthClients.findOne({ _id: clientId, revoked_at: null });
  }

  async revokeOAuthToken(jti: string, expiresAt: Date): Promise<void> {
    await this.oauthRevocations.updateOne(
      { _id: jti },
      { $setOnInsert: { _id: jti, revoked_at: now(), expires_at: expiresAt.toISOString() } },
      { upsert: true }
    );
  }

  async isOAuthTokenRevoked(jti: string): Promise<boolean> {
    return (await this.oauthRevocations.countDocuments({ _id: jti }, { limit: 1 })) > 0;
  }

  // ---- daemon assets (the daemon's two factors: asset id + order root) ----

  async issueDaemonAsset(
    label: string | null,
    version: number
  ): Promise<{ orderRoot: string; doc: DaemonAssetDocument }> {
    const orderRoot = `or${version}_${newSecret('')}`;
    const doc: DaemonAssetDocument = {
      _id: newId('asset_'),
      order_root_hash: hashSecret(orderRoot),
      version,
      label,
      created_at: now(),
      revoked_at: null
    };
    await this.daemonAssets.insertOne(doc);
    return { orderRoot, doc };
  }

  findDaemonAsset(assetId: string): Promise<DaemonAssetDocument | null> {
    return this.daemonAssets.findOne({ _id: assetId, revoked_at: null });
  }
}
