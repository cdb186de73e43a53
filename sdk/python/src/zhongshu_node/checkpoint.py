"""C2SP signed notes and tlog checkpoints (c2sp.org/signed-note, c2sp.org/tlog-checkpoint), verified with a key
the application pins: ``<name>+<key id hex>+<base64 of 0x01 || Ed25519 public key>``, the key id being the first
four bytes of SHA-256(name || 0x0A || 0x01 || public key). A checkpoint is accepted only with a valid signature of
that key; unknown signature lines are ignored, as the spec says. Witness cosignatures (c2sp.org/tlog-cosignature,
cosignature/v1) are checked against the witness keys the application pins, ``<name>+<key id hex>+<base64 of 0x04 ||
Ed25519 public key>`` (the key id over 0x04): a line naming a pinned witness that does not verify is a forgery."""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from .merkle import sha256


class VerificationError(Exception):
    """Why a checkpoint or proof was refused; ``kind`` says which check failed: checkpoint_format,
    checkpoint_signature, checkpoint_cosignature, checkpoint_origin, checkpoint_rollback, checkpoint_fork,
    consistency, inclusion, entry_mismatch."""

    def __init__(self, kind: str, message: str, details: Dict[str, Any] = None):
        super().__init__(message)
        self.kind = kind
        self.details = details or {}


@dataclass(frozen=True)
class VerifierKey:
    name: str
    key_id: bytes
    public_key: Ed25519PublicKey = field(repr=False)
    text: str  # the key as the application gave it (public: safe to log)


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes
    text: str  # the note exactly as served, kept to compare with the next one


def _b64(text: str) -> bytes:
    """Strict standard base64 (what the Go note package and the hub write); raises ValueError otherwise."""
    raw = base64.b64decode(text, validate=True)
    if base64.b64encode(raw).decode("ascii") != text:
        raise ValueError("not canonical base64")
    return raw


def parse_verifier_key(text: str) -> VerifierKey:
    """A checkpoint verifier key (type 0x01: the log's note signature)."""
    return _parse_key(text, 0x01)


def parse_witness_key(text: str) -> VerifierKey:
    """A witness's cosignature verifier key (type 0x04: cosignature/v1), as the witness publishes it."""
    return _parse_key(text, 0x04)


def _parse_key(text: str, key_type: int) -> VerifierKey:
    trimmed = text.strip()
    parts = trimmed.split("+", 2)  # the base64 key may itself hold '+'
    if len(parts) != 3:
        raise ValueError("a verifier key is <name>+<key id hex>+<base64 key>")
    name, id_hex, b64 = parts
    if not name or re.search(r"\s", name):
        raise ValueError("the verifier key name has white space or a plus sign")
    if not re.fullmatch(r"[0-9a-f]{8}", id_hex):
        raise ValueError("the verifier key id is not 8 hex digits")
    try:
        raw = _b64(b64)
    except (ValueError, binascii.Error):
        raw = b""
    if len(raw) != 33 or raw[0] != key_type:
        raise ValueError(f"the verifier key is not base64 of 0x0{key_type} and a 32-byte Ed25519 key")
    key_id = sha256(f"{name}\n".encode("utf-8"), raw)[:4]
    if key_id.hex() != id_hex:
        raise ValueError("the verifier key id does not match its name and key")
    return VerifierKey(name, key_id, Ed25519PublicKey.from_public_bytes(raw[1:]), trimmed)


_SIG_LINE = re.compile(r"^\u2014 (\S+) ([A-Za-z0-9+/=]+)$")


def open_note(text: str, key: VerifierKey) -> str:
    """Verifies a signed note with ``key``; returns its body (the signed text, ending in a newline)."""
    split = text.find("\n\n")
    if split < 0 or not text.endswith("\n"):
        raise VerificationError("checkpoint_format", "not a signed note")
    body = text[: split + 1]
    verified = False
    for line in text[split + 2 : -1].split("\n"):
        m = _SIG_LINE.match(line)
        if not m:
            raise VerificationError("checkpoint_format", "a malformed signature line")
        if m.group(1) != key.name:
            continue
        try:
            sig = base64.b64decode(m.group(2), validate=True)
        except (ValueError, binascii.Error):
            raise VerificationError("checkpoint_format", "a signature that is not base64") from None
        if len(sig) < 5 or sig[:4] != key.key_id:
            continue
        try:
            if len(sig) != 68:
                raise InvalidSignature()
            key.public_key.verify(sig[4:], body.encode("utf-8"))
        except InvalidSignature:
            raise VerificationError("checkpoint_signature", f"the signature of {key.name} does not verify") from None
        verified = True
    if not verified:
        raise VerificationError("checkpoint_signature", f"no signature of {key.name} on the note")
    return body


def verify_checkpoint(text: str, key: VerifierKey, origin: str = None) -> Checkpoint:
    """Verifies and parses a checkpoint; its origin must be the key's name (as the hub signs)."""
    origin = key.name if origin is None else origin
    body = open_note(text, key)
    lines = body[:-1].split("\n")
    if len(lines) < 3:
        raise VerificationError("checkpoint_format", "a checkpoint has at least three lines")
    first, size_text, root_text = lines[0], lines[1], lines[2]
    if first != origin:
        raise VerificationError("checkpoint_origin", f"the checkpoint is of {first}, not {origin}", {"origin": first})
    if not re.fullmatch(r"0|[1-9][0-9]*", size_text):
        raise VerificationError("checkpoint_format", "the checkpoint size is not a decimal number")
    try:
        root = _b64(root_text)
    except (ValueError, binascii.Error):
        root = b""
    if len(root) != 32:
        raise VerificationError("checkpoint_format", "the checkpoint root is not base64 of 32 bytes")
    return Checkpoint(first, int(size_text), root, text)


def verified_cosigners(text: str, witnesses: List[VerifierKey]) -> List[str]:
    """The pinned witnesses whose cosignature/v1 on the checkpoint note ``text`` verifies (their names). A line with
    a pinned witness's name and key id that does not verify raises ``checkpoint_cosignature``; lines of other keys
    are ignored."""
    split = text.find("\n\n")
    if split < 0 or not text.endswith("\n"):
        raise VerificationError("checkpoint_format", "not a signed note")
    body = text[: split + 1]
    cosigners: List[str] = []
    for line in text[split + 2 : -1].split("\n"):
        m = _SIG_LINE.match(line)
        if not m:
            raise VerificationError("checkpoint_format", "a malformed signature line")
        try:
            blob = base64.b64decode(m.group(2), validate=True)
        except (ValueError, binascii.Error):
            raise VerificationError("checkpoint_format", "a signature that is not base64") from None
        witness = next((w for w in witnesses if w.name == m.group(1) and blob[:4] == w.key_id), None)
        if witness is None:
            continue
        timestamp = int.from_bytes(blob[4:12], "big") if len(blob) == 76 else 0
        message = f"cosignature/v1\ntime {timestamp}\n{body}".encode("utf-8")
        try:
            if timestamp == 0:
                raise InvalidSignature()
            witness.public_key.verify(blob[12:], message)
        except InvalidSignature:
            raise VerificationError(
                "checkpoint_cosignature",
                f"the cosignature of witness {witness.name} does not verify",
                {"witness": witness.name},
            ) from None
        if witness.name not in cosigners:
            cosigners.append(witness.name)
    return cosigners
