/**
 * The hub's Ed25519 signing key: signs the ledger's signed tree heads. OAuth access tokens are signed by keys of
 * their own (`oauth`, store/keys/oauth-keys.ts), which rotate. Created at first start under DATA_DIR/keys with mode 0600;
 * every API process of one deployment must share it.
 */
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, KeyObject } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { OAuthKeyRing } from './oauth-keys';

export interface HubKeys {
  privateKey: KeyObject;
  publicKey: KeyObject;
  /** Key id: first 16 hex chars of SHA-256 over the raw public key. */
  kid: string;
  /** Raw 32-byte public key, base64. */
  publicKeyBase64: string;
  jwk: Record<string, string>;
  /** The OAuth signing keys (rotating, apart from this one). */
  oauth: OAuthKeyRing;
  /** The hub's X25519 key-agreement key (DATA_DIR/keys/hub-x25519.pem), published by the handshake. */
  keyAgreement: { privateKey: KeyObject; publicKey: KeyObject; jwk: Record<string, string> };
}

/** A PEM private key under DATA_DIR/keys, created on first use ('wx': a process that loses the race reads the winner's). */
function loadOrCreatePem(file: string, create: () => KeyObject): KeyObject {
  if (!fs.existsSync(file)) {
    fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    try {
      fs.writeFileSync(file, create().export({ format: 'pem', type: 'pkcs8' }).toString(), { mode: 0o600, flag: 'wx' });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
  return createPrivateKey(fs.readFileSync(file));
}

function loadKeyAgreement(dataDir: string): HubKeys['keyAgreement'] {
  const privateKey = loadOrCreatePem(
    path.join(dataDir, 'keys', 'hub-x25519.pem'),
    () => generateKeyPairSync('x25519').privateKey
  );
  const publicKey = createPublicKey(privateKey);
  const jwk = publicKey.export({ format: 'jwk' }) as Record<string, string>;
  const kid = createHash('sha256')
    .update(JSON.stringify({ crv: jwk.crv, kty: jwk.kty, x: jwk.x }))
    .digest('base64url');
  return { privateKey, publicKey, jwk: { ...jwk, kid, use: 'enc', alg: 'ECDH-ES' } };
}

export function loadOrCreateHubKeys(dataDir: string): HubKeys {
  const dir = path.join(dataDir, 'keys');
  const file = path.join(dir, 'hub-ed25519.pem');
  if (!fs.existsSync(file)) {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    const { privateKey } = generateKeyPairSync('ed25519');
    const pem = privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
    // 'wx' refuses to overwrite: if two processes race at first start, the loser reads the winner's key.
    try {
      fs.writeFileSync(file, pem, { mode: 0o600, flag: 'wx' });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
  const privateKey = createPrivateKey(fs.readFileSync(file));
  const publicKey = createPublicKey(privateKey);
  const jwk = publicKey.export({ format: 'jwk' }) as Record<string, string>;
  const raw = Buffer.from(jwk.x!, 'base64url');
  const kid = createHash('sha256').update(raw).digest('hex').slice(0, 16);
  return {
    privateKey,
    publicKey,
    kid,
    publicKeyBase64: raw.toString('base64'),
    jwk: { ...jwk, kid, alg: 'EdDSA', use: 'sig' },
    oauth: new OAuthKeyRing(dataDir),
    keyAgreement: loadKeyAgreement(dataDir)
  };
}
