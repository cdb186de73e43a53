"""Trust but verify: every acknowledged write is proven included in a checkpoint the SDK checked itself. A round
fetches ``GET /tlog/checkpoint``, checks its signature against the pinned verifier key, checks it is consistent
with the last checkpoint this node accepted (``GET /api/proof/consistency``, RFC 6962, recomputed here; the last
one is kept in a file, so a restart does not forget it), then asks ``GET /api/proof/inclusion`` for each
acknowledged write the checkpoint covers and recomputes the entry's leaf hash from what the node wrote and the path
to the signed root. Any mismatch is a VerificationError for the application; the checkpoint is then not adopted and
the write stays unverified."""

from __future__ import annotations

import logging
import os
import threading
from typing import Any, Callable, List, Optional, Tuple

from .canonical_json import canonical_json, leaf_bytes
from .checkpoint import (
    Checkpoint,
    VerificationError,
    VerifierKey,
    parse_verifier_key,
    parse_witness_key,
    verified_cosigners,
    verify_checkpoint,
)
from .credentials import write_private_file
from .http import HubError, HubHttp, Wake
from .merkle import hash_from_hex, leaf_hash, verify_consistency, verify_inclusion
from .outbox import Outbox, OutboxRecord


class LedgerVerifier:
    def __init__(
        self,
        http: HubHttp,
        outbox: Outbox,
        did: str,
        key_file: str,
        checkpoint_file: str,
        log: logging.Logger,
        stop: threading.Event,
        on_verified: Callable[[OutboxRecord, Checkpoint], None],
        on_checkpoint: Callable[[Checkpoint], None],
        on_error: Callable[[Exception], None],
        verifier_key: Optional[str] = None,
        interval_s: float = 10.0,
        proofs_per_round: int = 64,
        witnesses: Optional[List[str]] = None,
        witness_quorum: Optional[int] = None,
    ):
        self.http, self.outbox, self.did, self.log, self.stop = http, outbox, did, log, stop
        self.key_file, self.checkpoint_file = key_file, checkpoint_file
        self.on_verified, self.on_checkpoint, self.on_error = on_verified, on_checkpoint, on_error
        self.interval_s, self.proofs_per_round = interval_s, proofs_per_round
        self.key: Optional[VerifierKey] = parse_verifier_key(verifier_key) if verifier_key else None
        # With witnesses pinned, a checkpoint counts only with valid cosignatures of `witness_quorum` of them (default:
        # all); until one does, the writes wait unverified.
        self.witnesses = [parse_witness_key(w) for w in witnesses or []]
        self.quorum = len(self.witnesses) if witness_quorum is None else witness_quorum
        if not 0 <= self.quorum <= len(self.witnesses):
            raise ValueError(f"the witness quorum must be 0 to the {len(self.witnesses)} witnesses given")
        self.wake = Wake(stop)
        self._round_lock = threading.Lock()

    def kick(self) -> None:
        self.wake.kick()

    def last_checkpoint(self) -> Optional[Checkpoint]:
        """The last checkpoint this node accepted, if any."""
        if not os.path.exists(self.checkpoint_file) or self.key is None:
            return None
        with open(self.checkpoint_file, encoding="utf-8", newline="") as f:
            return verify_checkpoint(f.read(), self.key)

    def run(self) -> None:
        while not self.stop.is_set():
            if self.outbox.counts()["unverified"] > 0:
                try:
                    self.round()
                except VerificationError as err:
                    self.on_error(err)
                except Exception as err:  # the hub unreachable or answering oddly: next round
                    if self.stop.is_set():
                        break
                    self.log.warning("verification round failed: %s", err)
            self.wake.wait(self.interval_s)

    def round(self) -> Tuple[Checkpoint, int]:
        """One round: the checkpoint, its consistency with the last one, and inclusion proofs under it."""
        with self._round_lock:
            cp = self.checkpoint()
            due = self.outbox.take("unverified", self.proofs_per_round, lambda r: r.seq > cp.size)
            proven = 0
            for r in due:
                if self.stop.is_set():
                    break
                try:
                    self._prove_inclusion(r, cp)
                except VerificationError as err:
                    self.on_error(err)
                    continue
                self.outbox.mark_verified(r.id, cp.size)
                proven += 1
                r.verified_size = cp.size
                self.on_verified(r, cp)
            if proven:
                self.log.debug("writes proven included: %d in tree %d", proven, cp.size)
            return cp, proven

    def checkpoint(self) -> Checkpoint:
        """The hub's current checkpoint, verified and proven consistent with the last one accepted (then adopted)."""
        key = self._pinned_key()
        res = self.http.request("GET", "/tlog/checkpoint")
        if res.status != 200:
            raise HubError(res.status, f"GET /tlog/checkpoint answered {res.status}", res.body)
        new = verify_checkpoint(res.text, key)
        cosigners = verified_cosigners(res.text, self.witnesses)
        if len(cosigners) < self.quorum:
            # Not yet witnessed (the hub serves the newest checkpoint with enough cosignatures once it has one): the
            # writes wait for a later round. An error for the round, not a verification failure.
            raise HubError(
                res.status,
                f"the checkpoint of {new.size} carries {len(cosigners)} of the {self.quorum} witness cosignatures"
                " required",
                {"cosigners": cosigners},
            )
        last = self.last_checkpoint()
        if last:
            if new.size < last.size:
                raise VerificationError(
                    "checkpoint_rollback",
                    f"the hub's tree shrank from {last.size} to {new.size}",
                    {"last_size": last.size, "size": new.size},
                )
            if new.size == last.size and new.root != last.root:
                raise VerificationError(
                    "checkpoint_fork", f"two different roots for a tree of {new.size}", {"size": new.size}
                )
            if new.size > last.size > 0:
                proof = self.http.request("GET", f"/api/proof/consistency?first={last.size}&second={new.size}")
                if proof.status != 200:
                    raise HubError(proof.status, "no consistency proof", proof.body)
                hashes = _hex_list(proof.body.get("proof") if isinstance(proof.body, dict) else None)
                if hashes is None or not verify_consistency(last.size, new.size, last.root, new.root, hashes):
                    raise VerificationError(
                        "consistency",
                        f"the checkpoint of {new.size} is not consistent with the one of {last.size}",
                        {"first": last.size, "second": new.size},
                    )
        if not last or new.size != last.size:
            write_private_file(self.checkpoint_file, new.text)
            self.on_checkpoint(new)
        return new

    def _prove_inclusion(self, r: OutboxRecord, cp: Checkpoint) -> None:
        res = self.http.request("GET", f"/api/proof/inclusion?seq={r.seq}&tree_size={cp.size}")
        if res.status != 200:
            raise HubError(res.status, f"no inclusion proof for seq {r.seq}", res.body)
        body: Any = res.body if isinstance(res.body, dict) else {}
        entry = body.get("entry")

        def mismatch(what: str) -> VerificationError:
            return VerificationError(
                "entry_mismatch", f"entry {r.seq} is not the write {r.id}: {what}", {"id": r.id, "seq": r.seq}
            )

        if not isinstance(entry, dict) or entry.get("seq") != r.seq or body.get("leaf_index") != r.seq - 1:
            raise mismatch("another seq")
        if entry.get("kind") != "truth" or entry.get("key") != r.key:
            raise mismatch("another key")
        if entry.get("did") != self.did:
            raise mismatch("another DID")
        if entry.get("truth_type") != r.truth_type:
            raise mismatch("another truth type")
        if canonical_json(entry.get("value")) != canonical_json(r.value):
            raise mismatch("another value")
        if not isinstance(entry.get("event_id"), str) or not isinstance(entry.get("created_at"), str):
            raise mismatch("fields missing")
        # The leaf is recomputed from what this node wrote, never taken from the answer.
        leaf = leaf_hash(
            leaf_bytes(
                seq=r.seq,
                event_id=entry["event_id"],
                kind="truth",
                key=r.key,
                truth_type=r.truth_type,
                did=self.did,
                created_at=entry["created_at"],
                value=r.value,
            )
        )
        path = _hex_list(body.get("audit_path"))
        if path is None or not verify_inclusion(r.seq - 1, cp.size, leaf, path, cp.root):
            raise VerificationError(
                "inclusion",
                f"entry {r.seq} is not proven in the checkpoint of {cp.size}",
                {"id": r.id, "seq": r.seq, "tree_size": cp.size},
            )

    def _pinned_key(self) -> VerifierKey:
        """The pinned key; with none given, the hub's own, fetched once and pinned (trust on first use)."""
        if self.key:
            return self.key
        if os.path.exists(self.key_file):
            with open(self.key_file, encoding="utf-8") as f:
                self.key = parse_verifier_key(f.read())
            return self.key
        res = self.http.request("GET", "/tlog/verifier-key")
        if res.status != 200:
            raise HubError(res.status, "no verifier key", res.body)
        self.key = parse_verifier_key(res.text)
        write_private_file(self.key_file, self.key.text + "\n")
        self.log.warning(
            "no verifier key given: pinned the one the hub served now (trust on first use): %s", self.key.text
        )
        return self.key


def _hex_list(value: Any) -> Optional[List[bytes]]:
    if not isinstance(value, list):
        return None
    out = []
    for v in value:
        h = hash_from_hex(v)
        if h is None:
            return None
        out.append(h)
    return out
