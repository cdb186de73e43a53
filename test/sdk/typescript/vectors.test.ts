/**
 * The SDK's own verification code against published test vectors, read from `sdk/test-vectors.json`, the fixture
 * the Python SDK's tests read too (sdk/python/tests/test_vectors.py): RFC 6962 roots, inclusion and consistency
 * proofs (the certificate-transparency reference tree of 8 leaves, every index and size against a reference
 * computation, and tampered proofs), the Go sumdb signed-note example, a checkpoint signed per C2SP and forged
 * variants of it, canonical JSON, ledger leaf hashes and the backoff's schedule.
 */
import fs from 'node:fs';
import path from 'node:path';
import {
  Backoff,
  canonicalJson,
  leafBytes,
  leafHash,
  nodeHash,
  openNote,
  parseVerifierKey,
  parseWitnessKey,
  rootOf,
  verifiedCosigners,
  verifyCheckpoint,
  verifyConsistency,
  verifyInclusion,
  VerificationError,
  type LeafFields
} from '../../../sdk/typescript/src';

const V = JSON.parse(fs.readFileSync(path.join(__dirname, '../../../sdk/test-vectors.json'), 'utf8'));
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const LEAVES = (V.rfc6962.leaf_inputs as string[]).map((h) => leafHash(Buffer.from(h, 'hex')));
// RFC 6962 reference roots for the first n of these leaves (certificate-transparency's merkle tree test data).
const ROOTS = V.rfc6962.roots as string[];

/** RFC 6962 section 2.1.1 PATH(m, D[n]), the reference definition. */
function auditPath(m: number, leaves: Buffer[]): Buffer[] {
  if (leaves.length <= 1) return [];
  let k = 1;
  while (k * 2 < leaves.length) k *= 2;
  return m < k
    ? [...auditPath(m, leaves.slice(0, k)), rootOf(leaves.slice(k))]
    : [...auditPath(m - k, leaves.slice(k)), rootOf(leaves.slice(0, k))];
}

/** RFC 6962 section 2.1.2 PROOF(m, D[n]). */
function consistencyProof(m: number, leaves: Buffer[], complete = true): Buffer[] {
  const n = leaves.length;
  if (m === n) return complete ? [] : [rootOf(leaves)];
  let k = 1;
  while (k * 2 < n) k *= 2;
  return m <= k
    ? [...consistencyProof(m, leaves.slice(0, k), complete), rootOf(leaves.slice(k))]
    : [...consistencyProof(m - k, leaves.slice(k), false), rootOf(leaves.slice(0, k))];
}

describe('RFC 6962 hashing and proofs', () => {
  it('computes the reference roots, and the empty tree', () => {
    for (let n = 1; n <= 8; n++) expect(hex(rootOf(LEAVES.slice(0, n)))).toBe(ROOTS[n - 1]);
    expect(hex(rootOf([]))).toBe(V.rfc6962.empty_root);
    expect(hex(nodeHash(LEAVES[0]!, LEAVES[1]!))).toBe(ROOTS[1]);
  });

  it('verifies the published inclusion proofs', () => {
    for (const { index, size, proof: text } of V.rfc6962.inclusion as {
      index: number;
      size: number;
      proof: string[];
    }[]) {
      const proof = text.map((h) => Buffer.from(h, 'hex'));
      expect(proof.map(hex)).toEqual(auditPath(index, LEAVES.slice(0, size)).map(hex));
      expect(verifyInclusion(index, size, LEAVES[index]!, proof, Buffer.from(ROOTS[size - 1]!, 'hex'))).toBe(true);
    }
  });

  it('verifies every inclusion proof of trees up to 8 leaves and refuses every single-bit change', () => {
    for (let n = 1; n <= 8; n++) {
      const root = Buffer.from(ROOTS[n - 1]!, 'hex');
      for (let m = 0; m < n; m++) {
        const proof = auditPath(m, LEAVES.slice(0, n));
        expect(verifyInclusion(m, n, LEAVES[m]!, proof, root)).toBe(true);
        // wrong index, wrong leaf, a flipped bit of each proof hash, one hash too many or too few
        if (n > 1) expect(verifyInclusion((m + 1) % n, n, LEAVES[m]!, proof, root)).toBe(false);
        expect(verifyInclusion(m, n, LEAVES[(m + 1) % 8]!, proof, root)).toBe(false);
        proof.forEach((_, i) => {
          const bad = proof.map((p) => Buffer.from(p));
          bad[i]!.writeUInt8(bad[i]!.readUInt8(7) ^ 0x10, 7);
          expect(verifyInclusion(m, n, LEAVES[m]!, bad, root)).toBe(false);
        });
        expect(verifyInclusion(m, n, LEAVES[m]!, [...proof, root], root)).toBe(false);
        if (proof.length) expect(verifyInclusion(m, n, LEAVES[m]!, proof.slice(1), root)).toBe(false);
      }
    }
    expect(verifyInclusion(8, 8, LEAVES[0]!, [], Buffer.from(ROOTS[7]!, 'hex'))).toBe(false);
  });

  it('verifies every consistency proof between trees up to 8 leaves and refuses tampered ones', () => {
    const r = (n: number) => Buffer.from(ROOTS[n - 1]!, 'hex');
    for (const { first, second, proof } of V.rfc6962.consistency as {
      first: number;
      second: number;
      proof: string[];
    }[]) {
      expect(consistencyProof(first, LEAVES.slice(0, second)).map(hex)).toEqual(proof);
      const hashes = proof.map((h) => Buffer.from(h, 'hex'));
      expect(verifyConsistency(first, second, r(first), r(second), hashes)).toBe(true);
    }
    for (let n = 1; n <= 8; n++)
      for (let m = 1; m <= n; m++) {
        const proof = consistencyProof(m, LEAVES.slice(0, n));
        const r1 = r(m);
        const r2 = r(n);
        expect(verifyConsistency(m, n, r1, r2, proof)).toBe(true);
        if (m < n) {
          expect(verifyConsistency(m, n, r2, r2, proof)).toBe(false);
          expect(verifyConsistency(m, n, r1, r1, proof)).toBe(false);
          proof.forEach((_, i) => {
            const bad = proof.map((p) => Buffer.from(p));
            bad[i]!.writeUInt8(bad[i]!.readUInt8(0) ^ 1, 0);
            expect(verifyConsistency(m, n, r1, r2, bad)).toBe(false);
          });
        }
      }
    expect(verifyConsistency(0, 5, Buffer.alloc(32), r(5), [])).toBe(true);
    expect(verifyConsistency(5, 3, r(5), r(3), [])).toBe(false);
  });
});

describe('C2SP signed notes and checkpoints', () => {
  it('opens the Go sumdb/note example note with its verifier key', () => {
    const n = V.signed_note;
    const key = parseVerifierKey(n.key);
    expect(openNote(`${n.text}\n${n.signature}`, key)).toBe(n.text);
    // Another signer's line beside it is ignored; a changed text or signature is refused.
    expect(openNote(`${n.text}\n${n.signature}${n.other_signature}`, key)).toBe(n.text);
    expect(() => openNote(`${n.text.replace('answer', 'Answer')}\n${n.signature}`, key)).toThrow(VerificationError);
    expect(() => openNote(`${n.text}\n${n.other_signature}`, key)).toThrow(/no signature of PeterNeumann/);
    expect(() => parseVerifierKey(n.bad_key_id)).toThrow();
    // transparency-dev/formats' key whose base64 holds a '+'.
    expect(parseVerifierKey(n.plus_in_key.key).name).toBe(n.plus_in_key.name);
  });

  it('verifies a checkpoint signed per C2SP and refuses forged ones', () => {
    const c = V.checkpoint;
    const key = parseVerifierKey(c.key);
    const cp = verifyCheckpoint(c.note, key);
    expect(cp).toMatchObject({ origin: c.origin, size: c.size });
    expect(hex(cp.root)).toBe(c.root_hex);
    // A size changed after signing; a checkpoint of another origin signed by the same key; no blank line.
    for (const forged of c.forged as { note: string; error: string }[]) {
      let error: unknown;
      try {
        verifyCheckpoint(forged.note, key);
      } catch (err) {
        error = err;
      }
      expect(error).toBeInstanceOf(VerificationError);
      expect((error as VerificationError).kind).toBe(forged.error);
    }
  });
});

describe('C2SP witness cosignatures', () => {
  it('counts the pinned witnesses whose cosignature/v1 verifies, ignores others, refuses a forged one', () => {
    const c = V.cosigned_checkpoint;
    const witnesses = (c.witnesses as string[]).map(parseWitnessKey);
    const key = parseVerifierKey(V.checkpoint.key);
    // Two cosigners; one; a line of the same name under another key (ignored) and one; a forgery of the second.
    for (const t of c.cases as { note: string; cosigners?: string[]; error?: string }[]) {
      expect(verifyCheckpoint(t.note, key).size).toBe(V.checkpoint.size);
      if (t.cosigners) expect(verifiedCosigners(t.note, witnesses)).toEqual(t.cosigners);
      else expect(() => verifiedCosigners(t.note, witnesses)).toThrow(expect.objectContaining({ kind: t.error }));
    }
    // A note-signature key is no witness key, nor the reverse.
    expect(() => parseWitnessKey(V.checkpoint.key)).toThrow();
    expect(() => parseVerifierKey(c.witnesses[0])).toThrow();
  });
});

describe('canonical JSON (RFC 8785) and leaf hashes', () => {
  it('sorts members by UTF-16 code units and writes numbers as ECMAScript does', () => {
    for (const { input, canonical } of V.canonical_json as { input: string; canonical: string }[])
      expect(canonicalJson(JSON.parse(input))).toBe(canonical);
    expect(() => canonicalJson({ x: Number.NaN })).toThrow();
  });

  it('hashes ledger entries as the hub does', () => {
    for (const v of V.leaf_hashes as { fields: LeafFields; leaf_bytes: string; leaf_hash: string }[]) {
      expect(leafBytes(v.fields).toString('utf8')).toBe(v.leaf_bytes);
      expect(hex(leafHash(leafBytes(v.fields)))).toBe(v.leaf_hash);
    }
  });
});

describe('backoff', () => {
  it('waits 1 s, 2 s, 4 s, … with up to 10% jitter, capped, and longer when Retry-After asks', () => {
    const { base_ms, cap_ms, jitter, waits_ms } = V.backoff as Record<string, any>;
    const b = new Backoff(base_ms, cap_ms, jitter);
    const waits = (waits_ms as number[]).map(() => b.next());
    (waits_ms as number[]).forEach((base, i) => {
      expect(waits[i]).toBeGreaterThanOrEqual(base);
      expect(waits[i]).toBeLessThanOrEqual(base * (1 + jitter));
    });
    b.reset();
    expect(b.next(5000)).toBe(5000);
    expect(b.next(100)).toBeGreaterThanOrEqual(2000);
  });
});
