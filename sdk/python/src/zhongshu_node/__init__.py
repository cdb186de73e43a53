"""The zhongshu hub's node SDK: join and heartbeat, durable truth writes that never block, client-side
verification of signed checkpoints (RFC 6962 proofs), instructions and a worker loop. See README.md."""

from .canonical_json import canonical_json, leaf_bytes
from .checkpoint import (
    Checkpoint,
    VerificationError,
    VerifierKey,
    open_note,
    parse_verifier_key,
    parse_witness_key,
    verified_cosigners,
    verify_checkpoint,
)
from .credentials import CredentialsError, load_credentials, save_credentials
from .http import Backoff, HubError, HubHttp, NetworkError, retry_after_s
from .merkle import leaf_hash, node_hash, root_of, verify_consistency, verify_inclusion
from .node import HubNode, WriteHandle, WriteOutcome, WriteRefused
from .outbox import Outbox, OutboxLockedError, OutboxRecord
from .worker import TaskCompletion, TaskContext

__all__ = [
    "Backoff",
    "Checkpoint",
    "CredentialsError",
    "HubError",
    "HubHttp",
    "HubNode",
    "NetworkError",
    "Outbox",
    "OutboxLockedError",
    "OutboxRecord",
    "TaskCompletion",
    "TaskContext",
    "VerificationError",
    "VerifierKey",
    "WriteHandle",
    "WriteOutcome",
    "WriteRefused",
    "canonical_json",
    "leaf_bytes",
    "leaf_hash",
    "load_credentials",
    "node_hash",
    "open_note",
    "parse_verifier_key",
    "parse_witness_key",
    "retry_after_s",
    "root_of",
    "save_credentials",
    "verified_cosigners",
    "verify_checkpoint",
    "verify_consistency",
    "verify_inclusion",
]
__version__ = "0.1.0"
