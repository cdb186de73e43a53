"""RFC 6962 / RFC 9162 Merkle tree hashing and proof verification, implemented here so that the SDK trusts no
answer of the hub it has not recomputed: leaf = SHA-256(0x00 || bytes), node = SHA-256(0x01 || left || right).
Inclusion and consistency checks follow RFC 9162 sections 2.1.3.2 and 2.1.4.2."""

from __future__ import annotations

import hashlib
import re
from typing import List, Optional, Sequence


def sha256(*parts: bytes) -> bytes:
    h = hashlib.sha256()
    for p in parts:
        h.update(p)
    return h.digest()


def leaf_hash(data: bytes) -> bytes:
    return sha256(b"\x00", data)


def node_hash(left: bytes, right: bytes) -> bytes:
    return sha256(b"\x01", left, right)


def root_of(leaves: Sequence[bytes]) -> bytes:
    """The root of a list of leaf hashes (the reference definition: split at the largest power of two below n)."""
    if not leaves:
        return sha256()
    if len(leaves) == 1:
        return bytes(leaves[0])
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return node_hash(root_of(leaves[:k]), root_of(leaves[k:]))


def root_from_inclusion_proof(index: int, size: int, leaf: bytes, proof: Sequence[bytes]) -> Optional[bytes]:
    """The root an inclusion proof leads to from leaf ``index`` of a tree of ``size`` leaves; None if malformed."""
    if not (0 <= index < size):
        return None
    fn, sn, r = index, size - 1, bytes(leaf)
    for p in proof:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return r if sn == 0 else None


def verify_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes], root: bytes) -> bool:
    computed = root_from_inclusion_proof(index, size, leaf, proof)
    return computed is not None and computed == bytes(root)


def verify_consistency(first: int, second: int, first_root: bytes, second_root: bytes, proof: Sequence[bytes]) -> bool:
    """Whether ``proof`` shows the tree of ``first`` leaves to be a prefix of the tree of ``second``."""
    if first < 0 or first > second:
        return False
    if first == second:
        return len(proof) == 0 and bytes(first_root) == bytes(second_root)
    if first == 0:
        return len(proof) == 0  # the empty tree is a prefix of every tree
    path: List[bytes] = list(proof)
    if first & (first - 1) == 0:
        path.insert(0, bytes(first_root))  # a perfect first tree is itself the proof's first node
    if not path:
        return False
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = bytes(path[0])
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == bytes(first_root) and sr == bytes(second_root)


_HEX = re.compile(r"^[0-9a-f]{64}$")


def hash_from_hex(text: object) -> Optional[bytes]:
    """Decodes a 64-digit lower-case hex hash; None if it is not one."""
    return bytes.fromhex(text) if isinstance(text, str) and _HEX.match(text) else None
