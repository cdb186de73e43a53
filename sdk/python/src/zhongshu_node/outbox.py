"""The durable outbox of truth writes, in SQLite (the standard library's): one row per write, inserted and
committed (``synchronous=FULL``: the write-ahead log is fsynced) before ``enqueue`` returns, and updated at each
change of the write's state (acknowledged, held, decided, failed, verified). A crash loses no write whose
``enqueue`` returned: the next outbox on the file sends it again, with the same Idempotency-Key (its id), so it
lands once. Opening it drops the writes that are done (proven, failed, rejected, expired); one process at a time
holds it (an advisory lock the kernel releases when the process dies)."""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Optional

STATES = ("pending", "held", "acknowledged", "rejected", "expired", "failed")
_DONE = ("failed", "rejected", "expired")


@dataclass
class OutboxRecord:
    id: str  # also the write's Idempotency-Key
    key: str
    value: Dict[str, Any]
    truth_type: Optional[str]
    enqueued_at: str
    state: str = "pending"
    attempts: int = 0
    seq: Optional[int] = None
    event_id: Optional[str] = None
    approval_id: Optional[str] = None
    held_after: Optional[int] = None  # the ledger size before which a held write's decision cannot be
    error: Optional[Dict[str, Any]] = None  # why a write failed for good (the hub's answer)
    verified_size: Optional[int] = None  # the checkpoint size its inclusion was proven against


_COLUMNS = (
    "id, key, value, truth_type, enqueued_at, state, seq, event_id, approval_id, held_after, error, verified_size"
)


class OutboxLockedError(Exception):
    pass


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while n:
        n, r = divmod(n, 36)
        out = digits[r] + out
    return out or "0"


class Outbox:
    def __init__(self, path: str, durable: bool = True, keep_until_verified: bool = True):
        """``keep_until_verified``: acknowledged writes stay until their inclusion is proven (so a restart proves
        them still); without verification they leave at the next open."""
        os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o700, exist_ok=True)
        self.path = path
        self._keep = keep_until_verified
        self._mutex = threading.RLock()
        self._lock_fd = _lock(path + ".lock")
        self._records: Dict[str, OutboxRecord] = {}
        try:
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            os.chmod(path, 0o600)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._durable = durable
            self._sync("FULL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS writes (id TEXT PRIMARY KEY, key TEXT NOT NULL, value TEXT NOT NULL,"
                " truth_type TEXT, enqueued_at TEXT NOT NULL, state TEXT NOT NULL, seq INTEGER, event_id TEXT,"
                " approval_id TEXT, held_after INTEGER, error TEXT, verified_size INTEGER, n INTEGER)"
            )
            self._compact()
            for row in self._db.execute(f"SELECT {_COLUMNS} FROM writes ORDER BY n"):
                r = OutboxRecord(
                    id=row[0],
                    key=row[1],
                    value=json.loads(row[2]),
                    truth_type=row[3],
                    enqueued_at=row[4],
                    state=row[5],
                    seq=row[6],
                    event_id=row[7],
                    approval_id=row[8],
                    held_after=row[9],
                    error=json.loads(row[10]) if row[10] else None,
                    verified_size=row[11],
                )
                self._records[r.id] = r
        except BaseException:
            self.close()
            raise
        self._n = len(self._records)

    def enqueue(self, key: str, value: Dict[str, Any], truth_type: Optional[str] = None) -> OutboxRecord:
        """Stores the write durably and returns its record; no network I/O."""
        rid = f"w_{_base36(int(time.time() * 1000))}_{secrets.token_hex(9)}"
        at = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        r = OutboxRecord(id=rid, key=key, value=json.loads(text), truth_type=truth_type, enqueued_at=at)
        with self._mutex:
            self._n += 1
            self._sync("FULL")
            self._db.execute(
                "INSERT INTO writes (id, key, value, truth_type, enqueued_at, state, n) VALUES (?,?,?,?,?,?,?)",
                (rid, key, text, truth_type, at, "pending", self._n),
            )
            self._records[rid] = r
        return replace(r)

    def acknowledge(self, rid: str, seq: int, event_id: Optional[str]) -> None:
        self._update(rid, state="acknowledged", seq=seq, event_id=event_id)

    def hold(self, rid: str, approval_id: str, after: Optional[int]) -> None:
        self._update(rid, state="held", approval_id=approval_id, held_after=after)

    def decide(self, rid: str, state: str, seq: Optional[int] = None, event_id: Optional[str] = None) -> None:
        self._update(rid, state=state, seq=seq, event_id=event_id)

    def fail(self, rid: str, status: int, code: Optional[str], message: str) -> None:
        self._update(rid, state="failed", error={"status": status, "code": code, "message": message})

    def mark_verified(self, rid: str, size: int) -> None:
        self._update(rid, verified_size=size)

    def attempted(self, rid: str) -> None:
        """Counts one more attempt (kept in memory only: not worth an fsync)."""
        with self._mutex:
            r = self._records.get(rid)
            if r:
                r.attempts += 1

    def get(self, rid: str) -> Optional[OutboxRecord]:
        with self._mutex:
            r = self._records.get(rid)
            return replace(r) if r else None

    def list(self, predicate: Optional[Callable[[OutboxRecord], bool]] = None) -> List[OutboxRecord]:
        """Every write the outbox still tracks, oldest first."""
        with self._mutex:
            return [replace(r) for r in self._records.values() if predicate is None or predicate(r)]

    def take(self, state: str, limit: int, skip: Optional[Callable[[OutboxRecord], bool]] = None) -> List[OutboxRecord]:
        """Up to ``limit`` writes in ``state`` ('unverified': acknowledged, not yet proven), oldest first."""
        out: List[OutboxRecord] = []
        with self._mutex:
            for r in self._records.values():
                if len(out) >= limit:
                    break
                if _in(r, state) and not (skip and skip(r)):
                    out.append(replace(r))
        return out

    def counts(self) -> Dict[str, int]:
        with self._mutex:
            c = {s: 0 for s in STATES}
            c["unverified"] = 0
            for r in self._records.values():
                c[r.state] += 1
                if _in(r, "unverified"):
                    c["unverified"] += 1
            return c

    def close(self) -> None:
        """Closes the database and lets another outbox open it."""
        with self._mutex:
            db = getattr(self, "_db", None)
            if db is not None:
                db.close()
                self._db = None
            if self._lock_fd is not None:
                os.close(self._lock_fd)  # releases the lock
                self._lock_fd = None

    def _update(self, rid: str, **changes: Any) -> None:
        with self._mutex:
            r = self._records.get(rid)
            if r is None:
                return
            if self._db is None:
                raise RuntimeError("the outbox is closed")
            # A state change lost to a crash costs a resend with the same Idempotency-Key, which the hub answers with
            # the first entry (or the same approval): it needs no fsync of its own; the next enqueue's carries it.
            self._sync("NORMAL")
            columns = ", ".join(f"{k} = ?" for k in changes)
            values = [json.dumps(v) if k == "error" else v for k, v in changes.items()]
            self._db.execute(f"UPDATE writes SET {columns} WHERE id = ?", (*values, rid))
            for k, v in changes.items():
                setattr(r, k, v)
            self._prune()

    def _sync(self, level: str) -> None:
        level = level if self._durable else "OFF"
        if level != getattr(self, "_level", None):
            self._db.execute(f"PRAGMA synchronous={level}")
            self._level = level

    def _prune(self) -> None:
        """Forgets writes that are done once they outnumber the open ones (their rows left at the last open)."""
        done = [rid for rid, r in self._records.items() if _finished(r, self._keep)]
        if len(done) > 2000 + 2 * (len(self._records) - len(done)):
            placeholders = ",".join("?" * len(done))
            self._db.execute(f"DELETE FROM writes WHERE id IN ({placeholders})", done)
            for rid in done:
                del self._records[rid]

    def _compact(self) -> None:
        done = "state IN ('failed', 'rejected', 'expired') OR verified_size IS NOT NULL"
        if not self._keep:
            done += " OR state = 'acknowledged'"
        self._db.execute(f"DELETE FROM writes WHERE {done}")
        self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _in(r: OutboxRecord, state: str) -> bool:
    if state == "unverified":
        return r.state == "acknowledged" and r.verified_size is None
    return r.state == state


def _finished(r: OutboxRecord, keep_until_verified: bool) -> bool:
    return r.state in _DONE or r.verified_size is not None or (r.state == "acknowledged" and not keep_until_verified)


def _lock(path: str) -> int:
    """One outbox per file: two processes sending one outbox would send its writes twice at once."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        try:
            owner = os.read(fd, 32).decode("ascii", "replace").strip() or "?"
        finally:
            os.close(fd)
        raise OutboxLockedError(f"the outbox {path[:-5]} is in use by process {owner}") from None
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode("ascii"))
    return fd
