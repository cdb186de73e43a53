/**
 * Hub keys made by a tlog test before its hubs start, so that every hub's checkpoint and witness keys are known to
 * the test (and to the other hubs' settings) from the outset: a DATA_DIR holding `keys/hub-ed25519.pem`, which the hub
 * then uses as its own (store/keys/hub-keys.ts).
 */
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/** The 32 bytes of an Ed25519 public key (what signed-note and cosignature keys encode). */
export const rawKey = (k: KeyObject): Buffer => Buffer.from(k.export({ format: 'jwk' }).x as string, 'base64url');

/** A fresh data dir under ZH_TEST_DATA_DIR (`<prefix>-…`) with a hub key of its own, and that key. */
export function dataDirWithHubKey(prefix: string): { dir: string; privateKey: KeyObject; raw: Buffer } {
  const dir = fs.mkdtempSync(path.join(process.env.ZH_TEST_DATA_DIR!, `${prefix}-`));
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  fs.mkdirSync(path.join(dir, 'keys'), { recursive: true, mode: 0o700 });
  fs.writeFileSync(
    path.join(dir, 'keys', 'hub-ed25519.pem'),
    privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
    { mode: 0o600 }
  );
  return { dir, privateKey, raw: rawKey(publicKey) };
}
