/**
 * The SDK's own verification code against published test vectors: RFC 6962 roots, inclusion and consistency proofs
 * (the certificate-transparency reference tree of 8 leaves, every index and size against a reference computation,
 * and tampered proofs), the Go sumdb signed-note example and checkpoints signed here per C2SP, canonical JSON.
 */
import { generateKeyPairSync, sign, createHash } from 'node:crypto';
import {
  Backoff,
  canonicalJson,
  leafHash,
  nodeHash,
  openNote,
  parseVerifierKey,
  rootOf,
  verifyCheckpoint,
  verifyConsistency,
  verifyInclusion,
  VerificationError
} from '../../../sdk/typescript/src';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const LEAVES = ['', '00', '10', '2021', '3031', '40414243', '5051525354555657', '606162636465666768696a6b6c6d6e6f'].map(
  (h) => leafHash(Buffer.from(h, 'hex'))
);
// RFC 6962 reference roots for the first n of these leaves (certificate-transparency's merkle tree test data).
const ROOTS = [
  '6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d',
  'fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125',
  'aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77',
  'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7',
  '4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4',
  '76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef',
  'ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c',
  '5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328'
];

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
    expect(hex(rootOf([]))).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(hex(nodeHash(LEAVES[0]!, LEAVES[1]!))).toBe(ROOTS[1]);
  });

  it('verifies the published inclusion proof of leaf 0 in the tree of 8', () => {
    const proof = [
      '96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7',
      '5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e',
      '6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4'
    ].map((h) => Buffer.from(h, 'hex'));
    expect(proof.map(hex)).toEqual(auditPath(0, LEAVES).map(hex));
    expect(verifyInclusion(0, 8, LEAVES[0]!, proof, Buffer.from(ROOTS[7]!, 'hex'))).toBe(true);
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
    // The published proof from 2 to 5 leaves.
    const published = [
      '5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e',
      'bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b'
    ];
    expect(consistencyProof(2, LEAVES.slice(0, 5)).map(hex)).toEqual(published);
    const r = (n: number) => Buffer.from(ROOTS[n - 1]!, 'hex');
    expect(
      verifyConsistency(
        2,
        5,
        r(2),
        r(5),
        published.map((h) => Buffer.from(h, 'hex'))
      )
    ).toBe(true);
    for (let n = 1; n <= 8; n++)
      for (let m = 1; m <= n; m++) {
        const proof = consistencyProof(m, LEAVES.slice(0, n));
        const r1 = Buffer.from(ROOTS[m - 1]!, 'hex');
        const r2 = Buffer.from(ROOTS[n - 1]!, 'hex');
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
    expect(verifyConsistency(0, 5, Buffer.alloc(32), Buffer.from(ROOTS[4]!, 'hex'), [])).toBe(true);
    expect(verifyConsistency(5, 3, Buffer.from(ROOTS[4]!, 'hex'), Buffer.from(ROOTS[2]!, 'hex'), [])).toBe(false);
  });
});

describe('C2SP signed notes and checkpoints', () => {
  it('opens the Go sumdb/note example note with its verifier key', () => {
    const key = parseVerifierKey('PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW');
    const text =
      "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n";
    const sig =
      '\u2014 PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n';
    expect(openNote(`${text}\n${sig}`, key)).toBe(text);
    // Another signer's line beside it is ignored; a changed text or signature is refused.
    const other =
      '\u2014 EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox33WWd1RvMc+QQ=\n';
    expect(openNote(`${text}\n${sig}${other}`, key)).toBe(text);
    expect(() => openNote(`${text.replace('answer', 'Answer')}\n${sig}`, key)).toThrow(VerificationError);
    expect(() => openNote(`${text}\n${other}`, key)).toThrow(/no signature of PeterNeumann/);
    expect(() => parseVerifierKey('PeterNeumann+c74f20a4+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW')).toThrow();
    // transparency-dev/formats' key whose base64 holds a '+'.
    expect(parseVerifierKey('TEST+7997405c+AQcC+FTVKf0jlTdHDY3rbevmnKxxPjigCXlVtGe6RIr6').name).toBe('TEST');
  });

  it('verifies a checkpoint signed per C2SP and refuses a forged one', () => {
    const { publicKey, privateKey } = generateKeyPairSync('ed25519');
    const raw = Buffer.concat([Buffer.from([1]), publicKey.export({ format: 'der', type: 'spki' }).subarray(-32)]);
    const origin = 'example.test/tlog';
    const keyId = createHash('sha256').update(`${origin}\n`).update(raw).digest().subarray(0, 4);
    const key = `${origin}+${keyId.toString('hex')}+${raw.toString('base64')}`;
    const root = Buffer.from(ROOTS[7]!, 'hex');
    const signNote = (body: string) => {
      const sig = Buffer.concat([keyId, sign(null, Buffer.from(body), privateKey)]);
      return `${body}\n\u2014 ${origin} ${sig.toString('base64')}\n`;
    };
    const body = `${origin}\n8\n${root.toString('base64')}\n`;
    const cp = verifyCheckpoint(signNote(body), parseVerifierKey(key));
    expect(cp).toMatchObject({ origin, size: 8 });
    expect(cp.root.equals(root)).toBe(true);
    // A size or root changed after signing; a checkpoint of another origin signed by the same key.
    expect(() => verifyCheckpoint(signNote(body).replace('\n8\n', '\n9\n'), parseVerifierKey(key))).toThrow(
      /does not verify/
    );
    const otherOrigin = signNote(`other.test/tlog\n8\n${root.toString('base64')}\n`);
    expect(() => verifyCheckpoint(otherOrigin, parseVerifierKey(key))).toThrow(/not example.test/);
  });
});

describe('canonical JSON (RFC 8785)', () => {
  it('sorts members by UTF-16 code units and writes numbers as ECMAScript does', () => {
    expect(canonicalJson({ b: [1, 'x', null, true], a: { d: 1e21, c: 0.1, e: -0 } })).toBe(
      '{"a":{"c":0.1,"d":1e+21,"e":0},"b":[1,"x",null,true]}'
    );
    // RFC 8785 section 3.2.3's sorting example: "\u20ac" (€) sorts before "\ud83d\ude00" (a surrogate pair).
    expect(canonicalJson({ '\ud83d\ude00': 1, '\u20ac': 2, '\r': 3, '1': 4 })).toBe(
      '{"\\r":3,"1":4,"\u20ac":2,"\ud83d\ude00":1}'
    );
    expect(() => canonicalJson({ x: Number.NaN })).toThrow();
  });
});

describe('backoff', () => {
  it('waits 1 s, 2 s, 4 s, … with up to 10% jitter, capped, and longer when Retry-After asks', () => {
    const b = new Backoff(1000, 8000);
    const waits = Array.from({ length: 6 }, () => b.next());
    [1000, 2000, 4000, 8000, 8000, 8000].forEach((base, i) => {
      expect(waits[i]).toBeGreaterThanOrEqual(base);
      expect(waits[i]).toBeLessThanOrEqual(base * 1.1);
    });
    b.reset();
    expect(b.next(5000)).toBe(5000);
    expect(b.next(100)).toBeGreaterThanOrEqual(2000);
  });
});
