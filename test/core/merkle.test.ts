/** RFC 6962 hashing and proofs against the Certificate Transparency test vectors (8 leaves). */
import {
  appendToFrontier,
  consistencyProof,
  EMPTY_ROOT,
  frontierEnds,
  Hash,
  inclusionProof,
  leafHash,
  rootFromFrontier,
  rootOfLeaves,
  toHex,
  verifyConsistency,
  verifyInclusion
} from '../../core/ledger/merkle.node';

const INPUTS = ['', '00', '10', '2021', '3031', '40414243', '5051525354555657', '606162636465666768696a6b6c6d6e6f'].map(
  (h) => Buffer.from(h, 'hex')
);
const LEAVES = INPUTS.map((b) => leafHash(b));
const ROOTS = [
  'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
  '6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d',
  'fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125',
  'aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77',
  'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7',
  '4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4',
  '76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef',
  'ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c',
  '5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328'
];

/** Perfect subtrees straight from the leaves: what the ledger stores per entry. */
const perfectFrom = (leaves: Hash[]) => async (level: number, index: number) => {
  const start = index * 2 ** level;
  return rootOfLeaves(leaves.slice(start, start + 2 ** level));
};

describe('RFC 6962 Merkle tree hashing', () => {
  it('hashes the empty tree to SHA-256 of nothing', () => {
    expect(toHex(EMPTY_ROOT)).toBe(ROOTS[0]);
    expect(toHex(rootFromFrontier([]))).toBe(ROOTS[0]);
  });

  it.each(ROOTS.map((root, size) => [size, root]))('root of the first %i test leaves is %s', (size, root) => {
    expect(toHex(rootOfLeaves(LEAVES.slice(0, size as number)))).toBe(root);
  });

  it('records, per appended leaf, exactly the perfect subtrees it completes', () => {
    let frontier: Hash[] = [];
    const completedLevels: number[] = [];
    LEAVES.forEach((leaf, i) => {
      const res = appendToFrontier(frontier, i, leaf);
      frontier = res.frontier;
      completedLevels.push(res.completed.length - 1);
    });
    // leaf 8 completes levels 0..3, leaf 4 levels 0..2, leaf 2 and 6 levels 0..1
    expect(completedLevels).toEqual([0, 1, 0, 2, 0, 1, 0, 3]);
    expect(frontier).toHaveLength(1);
  });

  it('finds every frontier hash among the perfect subtrees the earlier leaves completed (frontierEnds)', () => {
    expect(frontierEnds(0)).toEqual([]);
    expect(frontierEnds(6)).toEqual([
      { seq: 4, level: 2 },
      { seq: 6, level: 1 }
    ]);
    expect(frontierEnds(2 ** 20)).toEqual([{ seq: 2 ** 20, level: 20 }]);
    expect(
      frontierEnds(1_000_001)
        .map((e) => e.seq)
        .at(-1)
    ).toBe(1_000_001);
    let frontier: Hash[] = [];
    const completed: Hash[][] = [];
    for (let size = 0; size < 300; size++) {
      const res = appendToFrontier(frontier, size, leafHash(Buffer.from(String(size))));
      frontier = res.frontier;
      completed.push(res.completed);
      expect(frontierEnds(size + 1).map(({ seq, level }) => completed[seq - 1]![level]!)).toEqual(frontier);
    }
  });
});

describe('RFC 6962 audit paths', () => {
  const perfect = perfectFrom(LEAVES);

  it('matches the published inclusion proofs', async () => {
    expect((await inclusionProof(0, 8, perfect)).map(toHex)).toEqual([
      '96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7',
      '5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e',
      '6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4'
    ]);
    expect((await inclusionProof(5, 8, perfect)).map(toHex)).toEqual([
      'bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b',
      'ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0',
      'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7'
    ]);
    expect(await inclusionProof(0, 1, perfect)).toEqual([]);
  });

  it('matches the published consistency proofs', async () => {
    expect((await consistencyProof(1, 8, perfect)).map(toHex)).toEqual([
      '96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7',
      '5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e',
      '6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4'
    ]);
    expect((await consistencyProof(6, 8, perfect)).map(toHex)).toEqual([
      '0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a',
      'ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0',
      'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7'
    ]);
    expect((await consistencyProof(2, 5, perfect)).map(toHex)).toEqual([
      '5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e',
      'bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b'
    ]);
  });

  it('verifies every inclusion and consistency proof of trees up to 40 leaves, and rejects altered ones', async () => {
    const leaves = Array.from({ length: 40 }, (_, i) => leafHash(Buffer.from(`entry ${i}`)));
    const p = perfectFrom(leaves);
    for (let size = 1; size <= 40; size++) {
      const root = rootOfLeaves(leaves.slice(0, size));
      for (let i = 0; i < size; i++) {
        const proof = await inclusionProof(i, size, p);
        expect(verifyInclusion(i, size, leaves[i]!, proof, root)).toBe(true);
        expect(verifyInclusion(i, size, leafHash(Buffer.from('forged')), proof, root)).toBe(false);
      }
      for (let first = 1; first <= size; first++) {
        const proof = await consistencyProof(first, size, p);
        const firstRoot = rootOfLeaves(leaves.slice(0, first));
        expect(verifyConsistency(first, size, firstRoot, root, proof)).toBe(true);
        if (first < size) expect(verifyConsistency(first, size, leafHash(Buffer.from('x')), root, proof)).toBe(false);
      }
    }
  });
});
