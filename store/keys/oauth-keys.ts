/**
 * The OAuth signing keys, apart from the hub's ledger key (store/keys/hub-keys.ts): Ed25519 keys under DATA_DIR/keys/oauth,
 * one PEM (mode 0600) per key, and `keyset.json` naming the current key and, for each retired one, until when it
 * still verifies (retirement + the longest token lifetime + a margin). Every API process shares DATA_DIR, as for
 * the hub key; each re-reads the key set when its file changes (one stat per use: cheap, and exact), so a rotation by
 * one process (`npm run admin -- rotate-oauth-key`) reaches all of them without a restart. Every token names its
 * key (`kid`, the RFC 7638 thumbprint); the JWKS lists the current key and every retired key still verifying.
 */
import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  KeyObject,
  randomBytes
} from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

export interface OAuthKey {
  kid: string;
  privateKey: KeyObject;
  publicKey: KeyObject;
  /** Public JWK with kid, alg, use. */
  jwk: Record<string, string>;
  created_at: string;
  /** Null for the current key; for a retired one, until when tokens it signed still verify. */
  verify_until: string | null;
}

interface KeySetFile {
  current: string;
  keys: { kid: string; created_at: string; verify_until: string | null }[];
}

/** How much longer than the token lifetime a retired key stays, for processes that sign with it a moment longer. */
const RETIRE_MARGIN_S = 60;

export class OAuthKeyRing {
  private readonly dir: string;
  private readonly setFile: string;
  private loaded: { mtimeMs: number; size: number; keys: Map<string, OAuthKey>; current: string } | null = null;

  constructor(dataDir: string) {
    this.dir = path.join(dataDir, 'keys', 'oauth');
    this.setFile = path.join(this.dir, 'keyset.json');
    if (!fs.existsSync(this.setFile)) this.writeInitial();
  }

  /** The key new tokens are signed with. */
  current(): OAuthKey {
    const state = this.state();
    return state.keys.get(state.current)!;
  }

  /** The key that verifies a token naming `kid`, if it is current or retired and still verifying. */
  verificationKey(kid: string, now = Date.now()): OAuthKey | null {
    const key = this.state().keys.get(kid);
    if (!key) return null;
    return key.verify_until === null || Date.parse(key.verify_until) > now ? key : null;
  }

  /** The JWKS: every key that still verifies, current first. */
  jwks(now = Date.now()): Record<string, string>[] {
    const state = this.state();
    return [...state.keys.values()]
      .filter((k) => k.verify_until === null || Date.parse(k.verify_until) > now)
      .sort((a, b) =>
        a.kid === state.current ? -1 : b.kid === state.current ? 1 : b.created_at.localeCompare(a.created_at)
      )
      .map((k) => k.jwk);
  }

  /**
   * A new current key; the previous one verifies for `maxTokenTtlS` + a margin more, then leaves the JWKS and its
   * file is deleted at a later rotation. Returns the new kid and the retired one.
   */
  rotate(maxTokenTtlS: number): { kid: string; retired: string; retired_verify_until: string } {
    const set = this.readSet();
    const now = Date.now();
    const { kid } = this.createKey();
    const retiredUntil = new Date(now + (maxTokenTtlS + RETIRE_MARGIN_S) * 1000).toISOString();
    const keys = set.keys
      .map((k) => (k.kid === set.current ? { ...k, verify_until: retiredUntil } : k))
      .filter((k) => k.verify_until === null || Date.parse(k.verify_until) > now);
    for (const gone of set.keys.filter((k) => !keys.some((kept) => kept.kid === k.kid)))
      fs.rmSync(this.pemPath(gone.kid), { force: true });
    keys.push({ kid, created_at: new Date(now).toISOString(), verify_until: null });
    this.writeSet({ current: kid, keys });
    return { kid, retired: set.current, retired_verify_until: retiredUntil };
  }

  private pemPath(kid: string): string {
    return path.join(this.dir, `${kid}.pem`);
  }

  private createKey(): { kid: string } {
    fs.mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    const kid = thumbprintSync(publicKey);
    fs.writeFileSync(this.pemPath(kid), privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(), {
      mode: 0o600,
      flag: 'wx'
    });
    return { kid };
  }

  /** First start: one key, written synchronously (the constructor runs before the listeners start). */
  private writeInitial(): void {
    fs.mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    const { privateKey } = generateKeyPairSync('ed25519');
    const kid = thumbprintSync(createPublicKey(privateKey));
    try {
      fs.writeFileSync(this.pemPath(kid), privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(), {
        mode: 0o600,
        flag: 'wx'
      });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    // 'wx': when two processes race at first start, the loser keeps the winner's key set (its own key file stays unused).
    try {
      fs.writeFileSync(
        this.setFile,
        JSON.stringify({ current: kid, keys: [{ kid, created_at: new Date().toISOString(), verify_until: null }] }),
        { mode: 0o600, flag: 'wx' }
      );
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }

  private readSet(): KeySetFile {
    return JSON.parse(fs.readFileSync(this.setFile, 'utf8')) as KeySetFile;
  }

  /** Atomic replacement: readers see the old set or the new one, never half of one. */
  private writeSet(set: KeySetFile): void {
    const tmp = `${this.setFile}.${randomBytes(6).toString('hex')}.tmp`;
    fs.writeFileSync(tmp, JSON.stringify(set), { mode: 0o600 });
    fs.renameSync(tmp, this.setFile);
  }

  private state(): NonNullable<OAuthKeyRing['loaded']> {
    const stat = fs.statSync(this.setFile);
    if (this.loaded && stat.mtimeMs === this.loaded.mtimeMs && stat.size === this.loaded.size) return this.loaded;
    const set = this.readSet();
    const keys = new Map<string, OAuthKey>();
    for (const entry of set.keys) {
      const cached = this.loaded?.keys.get(entry.kid);
      if (cached) {
        keys.set(entry.kid, { ...cached, verify_until: entry.verify_until });
        continue;
      }
      const privateKey = createPrivateKey(fs.readFileSync(this.pemPath(entry.kid)));
      const publicKey = createPublicKey(privateKey);
      const jwk = publicKey.export({ format: 'jwk' }) as Record<string, string>;
      keys.set(entry.kid, {
        kid: entry.kid,
        privateKey,
        publicKey,
        jwk: { ...jwk, kid: entry.kid, alg: 'EdDSA', use: 'sig' },
        created_at: entry.created_at,
        verify_until: entry.verify_until
      });
    }
    this.loaded = { mtimeMs: stat.mtimeMs, size: stat.size, keys, current: set.current };
    return this.loaded;
  }
}

/** RFC 7638 thumbprint of an Ed25519 public key, synchronously: SHA-256 over {"crv","kty","x"} in that order. */
function thumbprintSync(publicKey: KeyObject): string {
  const { crv, kty, x } = publicKey.export({ format: 'jwk' }) as Record<string, string>;
  return createHash('sha256').update(JSON.stringify({ crv, kty, x })).digest('base64url');
}
