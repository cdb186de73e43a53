"""The SDK's own verification code against the vectors the TypeScript SDK's tests read too (sdk/test-vectors.json):
RFC 6962 roots, inclusion and consistency proofs (every index and size of the reference tree of 8 leaves, and
tampered proofs), the Go sumdb signed-note example, a C2SP checkpoint and forged variants of it, witness
cosignatures of it, canonical JSON,
ledger leaf hashes and the backoff's schedule."""

import json

import pytest

from zhongshu_node import (
    Backoff,
    VerificationError,
    canonical_json,
    leaf_bytes,
    leaf_hash,
    node_hash,
    open_note,
    parse_verifier_key,
    parse_witness_key,
    retry_after_s,
    root_of,
    verified_cosigners,
    verify_checkpoint,
    verify_consistency,
    verify_inclusion,
)


@pytest.fixture(scope="module")
def tree(vectors):
    v = vectors["rfc6962"]
    leaves = [leaf_hash(bytes.fromhex(h)) for h in v["leaf_inputs"]]
    roots = [bytes.fromhex(h) for h in v["roots"]]
    return leaves, roots


def audit_path(m, leaves):
    """RFC 6962 section 2.1.1 PATH(m, D[n]), the reference definition."""
    if len(leaves) <= 1:
        return []
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    if m < k:
        return audit_path(m, leaves[:k]) + [root_of(leaves[k:])]
    return audit_path(m - k, leaves[k:]) + [root_of(leaves[:k])]


def consistency_proof(m, leaves, complete=True):
    """RFC 6962 section 2.1.2 PROOF(m, D[n])."""
    n = len(leaves)
    if m == n:
        return [] if complete else [root_of(leaves)]
    k = 1
    while k * 2 < n:
        k *= 2
    if m <= k:
        return consistency_proof(m, leaves[:k], complete) + [root_of(leaves[k:])]
    return consistency_proof(m - k, leaves[k:], False) + [root_of(leaves[:k])]


def flip(h, at, bit):
    b = bytearray(h)
    b[at] ^= bit
    return bytes(b)


def test_reference_roots_and_empty_tree(vectors, tree):
    leaves, roots = tree
    for n in range(1, 9):
        assert root_of(leaves[:n]) == roots[n - 1]
    assert root_of([]).hex() == vectors["rfc6962"]["empty_root"]
    assert node_hash(leaves[0], leaves[1]) == roots[1]


def test_published_inclusion_proofs(vectors, tree):
    leaves, roots = tree
    for case in vectors["rfc6962"]["inclusion"]:
        proof = [bytes.fromhex(h) for h in case["proof"]]
        assert proof == audit_path(case["index"], leaves[: case["size"]])
        assert verify_inclusion(case["index"], case["size"], leaves[case["index"]], proof, roots[case["size"] - 1])


def test_every_inclusion_proof_and_every_single_bit_change(tree):
    leaves, roots = tree
    for n in range(1, 9):
        root = roots[n - 1]
        for m in range(n):
            proof = audit_path(m, leaves[:n])
            assert verify_inclusion(m, n, leaves[m], proof, root)
            if n > 1:
                assert not verify_inclusion((m + 1) % n, n, leaves[m], proof, root)
            assert not verify_inclusion(m, n, leaves[(m + 1) % 8], proof, root)
            for i in range(len(proof)):
                bad = list(proof)
                bad[i] = flip(bad[i], 7, 0x10)
                assert not verify_inclusion(m, n, leaves[m], bad, root)
            assert not verify_inclusion(m, n, leaves[m], proof + [root], root)
            if proof:
                assert not verify_inclusion(m, n, leaves[m], proof[1:], root)
    assert not verify_inclusion(8, 8, leaves[0], [], roots[7])


def test_every_consistency_proof_and_tampered_ones(vectors, tree):
    leaves, roots = tree
    for case in vectors["rfc6962"]["consistency"]:
        first, second = case["first"], case["second"]
        assert [h.hex() for h in consistency_proof(first, leaves[:second])] == case["proof"]
        proof = [bytes.fromhex(h) for h in case["proof"]]
        assert verify_consistency(first, second, roots[first - 1], roots[second - 1], proof)
    for n in range(1, 9):
        for m in range(1, n + 1):
            proof = consistency_proof(m, leaves[:n])
            r1, r2 = roots[m - 1], roots[n - 1]
            assert verify_consistency(m, n, r1, r2, proof)
            if m < n:
                assert not verify_consistency(m, n, r2, r2, proof)
                assert not verify_consistency(m, n, r1, r1, proof)
                for i in range(len(proof)):
                    bad = list(proof)
                    bad[i] = flip(bad[i], 0, 1)
                    assert not verify_consistency(m, n, r1, r2, bad)
    assert verify_consistency(0, 5, bytes(32), roots[4], [])
    assert not verify_consistency(5, 3, roots[4], roots[2], [])


def test_go_sumdb_note_example(vectors):
    n = vectors["signed_note"]
    key = parse_verifier_key(n["key"])
    assert open_note(f"{n['text']}\n{n['signature']}", key) == n["text"]
    # Another signer's line beside it is ignored; a changed text or signature is refused.
    assert open_note(f"{n['text']}\n{n['signature']}{n['other_signature']}", key) == n["text"]
    with pytest.raises(VerificationError):
        open_note(f"{n['text'].replace('answer', 'Answer')}\n{n['signature']}", key)
    with pytest.raises(VerificationError, match="no signature of PeterNeumann"):
        open_note(f"{n['text']}\n{n['other_signature']}", key)
    with pytest.raises(ValueError):
        parse_verifier_key(n["bad_key_id"])
    # transparency-dev/formats' key whose base64 holds a '+'.
    assert parse_verifier_key(n["plus_in_key"]["key"]).name == n["plus_in_key"]["name"]


def test_checkpoint_and_forged_ones(vectors):
    c = vectors["checkpoint"]
    key = parse_verifier_key(c["key"])
    cp = verify_checkpoint(c["note"], key)
    assert (cp.origin, cp.size, cp.root.hex()) == (c["origin"], c["size"], c["root_hex"])
    for forged in c["forged"]:
        with pytest.raises(VerificationError) as caught:
            verify_checkpoint(forged["note"], key)
        assert caught.value.kind == forged["error"]


def test_witness_cosignatures(vectors):
    c = vectors["cosigned_checkpoint"]
    witnesses = [parse_witness_key(w) for w in c["witnesses"]]
    key = parse_verifier_key(vectors["checkpoint"]["key"])
    # Two cosigners; one; a line of the same name under another key (ignored) and one; a forgery of the second.
    for case in c["cases"]:
        assert verify_checkpoint(case["note"], key).size == vectors["checkpoint"]["size"]
        if "cosigners" in case:
            assert verified_cosigners(case["note"], witnesses) == case["cosigners"]
        else:
            with pytest.raises(VerificationError) as caught:
                verified_cosigners(case["note"], witnesses)
            assert caught.value.kind == case["error"]
    # A note-signature key is no witness key, nor the reverse.
    with pytest.raises(ValueError):
        parse_witness_key(vectors["checkpoint"]["key"])
    with pytest.raises(ValueError):
        parse_verifier_key(c["witnesses"][0])


def test_canonical_json(vectors):
    for case in vectors["canonical_json"]:
        assert canonical_json(json.loads(case["input"])) == case["canonical"]
    with pytest.raises(ValueError):
        canonical_json({"x": float("nan")})


def test_leaf_hashes(vectors):
    for case in vectors["leaf_hashes"]:
        data = leaf_bytes(**case["fields"])
        assert data.decode("utf-8") == case["leaf_bytes"]
        assert leaf_hash(data).hex() == case["leaf_hash"]


def test_backoff_schedule_and_retry_after(vectors):
    b = vectors["backoff"]
    backoff = Backoff(b["base_ms"] / 1000, b["cap_ms"] / 1000, b["jitter"])
    for base_ms in b["waits_ms"]:
        wait = backoff.next()
        assert base_ms / 1000 <= wait <= base_ms / 1000 * (1 + b["jitter"])
    backoff.reset()
    assert backoff.next(5.0) == 5.0
    assert backoff.next(0.1) >= 2.0
    assert retry_after_s({"retry-after": "2"}) == 2.0
    assert retry_after_s({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, now=1445412470.0) == 10.0
    assert retry_after_s({}) is None
