/**
 * Random hex for the ids made at every request (trace ids, ledger event ids): drawn from a pool the system's
 * generator fills 4 KiB at a time (as crypto.randomUUID does), each byte used once. One call into the generator per
 * id cost some 20 µs on the truth write's path (a CPU profile of the API under bench:ledger: trace id and event id,
 * two per write).
 */
import { randomBytes } from 'node:crypto';

const POOL_BYTES = 4096;
let pool = Buffer.alloc(0);
let offset = 0;

/** `bytes` random bytes as lowercase hex (at most POOL_BYTES). */
export function randomHex(bytes: number): string {
  if (offset + bytes > pool.length) {
    pool = randomBytes(POOL_BYTES);
    offset = 0;
  }
  const hex = pool.toString('hex', offset, offset + bytes);
  offset += bytes;
  return hex;
}
