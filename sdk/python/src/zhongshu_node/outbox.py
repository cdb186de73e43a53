"""The durable outbox of truth writes, in SQLite (the standard library's), in write-ahead-log mode: one row per
write, updated at each change of the write's state (acknowledged, held, decided, failed, verified). A write is in the
kernel when ``enqueue`` returns, so a crash of the node's process loses no write whose ``enqueue`` returned: the next
outbox on the file sends it again, with the same Idempotency-Key (its id), so it lands once. How it gets there, and
onto the disk as well (so that it survives a crash of the machine), depends on ``sync``:

- ``"group"`` (default): ``enqueue`` copies the write into the intake (intake.py: a file mapped into memory; no
  system call, so the caller's thread keeps the GIL) and returns. A syncer thread moves the intake into SQLite
  (commits that do not fsync: ``synchronous=NORMAL``, no automatic checkpoint), then checkpoints the log
  (``wal_checkpoint(PASSIVE)``, which fsyncs it first) on a connection of its own, whenever writes came since its
  last round; a sender thread changing a write's state moves the intake first too. A crash of the machine loses at
  most the writes since the last round. ``flush()`` waits for them.
- ``"each"``: ``synchronous=FULL``: ``enqueue`` inserts the row and its commit fsyncs the log (the caller waits for
  the disk).
- ``"none"``: the intake, as ``"group"``, and ``synchronous=OFF``.

Opening it drops the writes that are done (proven, failed, rejected, expired); one process at a time holds it (an
advisory lock the kernel releases when the process dies)."""

from __future__ import annotations

import fcntl
import json
import os
import random
import sqlite3
import threading
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Optional

from .intake import Intake

_LEVELS = {"group": "NORMAL", "each": "FULL", "none": "OFF"}
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
    def __init__(self, path: str, sync: str = "group", keep_until_verified: bool = True):
        """``sync``: "group", "each" or "none" (see the module). ``keep_until_verified``: acknowledged writes stay
        until their inclusion is proven (so a restart proves them still); without verification they leave at the next
        open."""
        if sync not in ("group", "each", "none"):
            raise ValueError(f'sync is "group", "each" or "none", not {sync!r}')
        self._mode = sync
        self._committed = 0  # rows committed (enqueues and changes) since the open
        self._synced = 0  # of those, how many the syncer's last round put on the disk
        self._sync_error: Optional[BaseException] = None
        self._synced_cond = threading.Condition(threading.Lock())
        self._syncer: Optional[threading.Thread] = None
        self._closing = False
        os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o700, exist_ok=True)
        self.path = path
        self._keep = keep_until_verified
        # Held for the database; enqueue into the intake never takes it. Readers of _records iterate a copy (made
        # in one step under the GIL), since enqueue adds to it without this lock.
        self._mutex = threading.RLock()
        self._lock_fd = _lock(path + ".lock")
        self._records: Dict[str, OutboxRecord] = {}
        self._intake: Optional[Intake] = None
        # Write ids need to be unique, not secret: os.urandom would let go of the GIL at every call.
        self._ids = random.Random(os.urandom(32))
        try:
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            os.chmod(path, 0o600)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={_LEVELS[sync]}")
            if sync == "group":
                # No checkpoint inside a caller's commit: the syncer runs them.
                self._db.execute("PRAGMA wal_autocheckpoint=0")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS writes (id TEXT PRIMARY KEY, key TEXT NOT NULL, value TEXT NOT NULL,"
                " truth_type TEXT, enqueued_at TEXT NOT NULL, state TEXT NOT NULL, seq INTEGER, event_id TEXT,"
                " approval_id TEXT, held_after INTEGER, error TEXT, verified_size INTEGER, n INTEGER)"
            )
            self._n = self._db.execute("SELECT COALESCE(MAX(n), 0) FROM writes").fetchone()[0]
            # Writes a crashed process left in the intake; then it takes new ones (not with "each").
            intake = Intake(path + ".intake")
            self._intake = intake
            self._drain()
            if sync == "each":
                intake.close()
                self._intake = None
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
        if sync != "each":
            self._wake = threading.Event()
            self._syncer = threading.Thread(target=self._sync_rounds, name="zhongshu-outbox-sync", daemon=True)
            self._syncer.start()

    def enqueue(self, key: str, value: Dict[str, Any], truth_type: Optional[str] = None) -> OutboxRecord:
        """Stores the write durably and returns its record; no network I/O."""
        rid = f"w_{_base36(int(time.time() * 1000))}_{self._ids.getrandbits(72):018x}"
        at = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        r = OutboxRecord(id=rid, key=key, value=json.loads(text), truth_type=truth_type, enqueued_at=at)
        if self._sync_error is not None:
            raise self._sync_error
        row = (rid, key, text, truth_type, at)
        intake = self._intake
        if intake is None or not intake.append(json.dumps(row, ensure_ascii=False).encode("utf-8")):
            # "each", or the intake full (a burst larger than it): into the database on this thread.
            with self._mutex:
                if self._db is None:
                    raise RuntimeError("the outbox is closed")
                self._drain()
                self._insert([row])
        self._records[rid] = r
        if self._syncer is not None:
            self._wake.set()
        return replace(r)

    def _drain(self) -> None:
        """Moves the intake's writes into the database (under _mutex)."""
        if self._intake is None or not self._intake.pending():
            return
        bodies, mark = self._intake.take()
        self._insert([tuple(json.loads(bytes(b).decode("utf-8"))) for b in bodies])
        self._intake.taken(mark)

    def _insert(self, rows: List[tuple]) -> None:
        """Inserts new writes, in one transaction; one already there (moved before a crash) is left as it is."""
        self._db.execute("BEGIN")
        try:
            for row in rows:
                self._n += 1
                self._db.execute(
                    "INSERT OR IGNORE INTO writes (id, key, value, truth_type, enqueued_at, state, n)"
                    " VALUES (?,?,?,?,?,'pending',?)",
                    (*row, self._n),
                )
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._committed += len(rows)

    def flush(self, timeout_s: Optional[float] = None) -> bool:
        """Waits until every row committed so far is on the disk (at once with sync "each" or "none"); False when
        ``timeout_s`` passed first. Raises what the syncer met if the disk failed."""
        if self._mode != "group":
            return True
        with self._mutex:
            self._drain()
            target = self._committed
        self._wake.set()
        with self._synced_cond:
            done = self._synced_cond.wait_for(
                lambda: self._synced >= target or self._sync_error is not None or self._closing, timeout_s
            )
        if self._sync_error is not None:
            raise self._sync_error
        return done

    def _sync_rounds(self) -> None:
        """The syncer: moves the intake into the database, then ("group") checkpoints the log (fsynced first) whenever
        rows were committed since the last round."""
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        try:
            db.execute("PRAGMA synchronous=NORMAL")  # a checkpoint fsyncs the log, then the database file
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._closing:
                    return
                with self._mutex:
                    if self._db is None:
                        return
                    try:
                        self._drain()
                    except sqlite3.Error as err:  # the disk failing: the next enqueue raises it
                        self._sync_error = err
                    target = self._committed
                if target == self._synced or self._mode != "group":
                    continue
                try:
                    db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error as err:  # the disk failing: the next enqueue raises it
                    self._sync_error = err
                with self._synced_cond:
                    self._synced = target
                    self._synced_cond.notify_all()
        finally:
            db.close()

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
                self._records[rid] = replace(r, attempts=r.attempts + 1)

    def get(self, rid: str) -> Optional[OutboxRecord]:
        r = self._records.get(rid)
        return replace(r) if r else None

    def list(self, predicate: Optional[Callable[[OutboxRecord], bool]] = None) -> List[OutboxRecord]:
        """Every write the outbox still tracks, oldest first."""
        return [replace(r) for r in list(self._records.values()) if predicate is None or predicate(r)]

    def take(self, state: str, limit: int, skip: Optional[Callable[[OutboxRecord], bool]] = None) -> List[OutboxRecord]:
        """Up to ``limit`` writes in ``state`` ('unverified': acknowledged, not yet proven), oldest first."""
        out: List[OutboxRecord] = []
        for r in list(self._records.values()):
            if len(out) >= limit:
                break
            if _in(r, state) and not (skip and skip(r)):
                out.append(replace(r))
        return out

    def counts(self) -> Dict[str, int]:
        c = {s: 0 for s in STATES}
        c["unverified"] = 0
        for r in list(self._records.values()):
            c[r.state] += 1
            if _in(r, "unverified"):
                c["unverified"] += 1
        return c

    def close(self) -> None:
        """Closes the database (the last connection's close checkpoints and syncs it) and lets another outbox open
        it."""
        syncer = getattr(self, "_syncer", None)
        if syncer is not None:
            self._closing = True
            self._wake.set()
            syncer.join()
            self._syncer = None
            with self._synced_cond:
                self._synced_cond.notify_all()
        with self._mutex:
            db = getattr(self, "_db", None)
            if db is not None:
                try:
                    self._drain()
                finally:
                    db.close()
                    self._db = None
            intake = getattr(self, "_intake", None)
            if intake is not None:
                intake.close()
                self._intake = None
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
            self._drain()  # the write's row, if it is still in the intake
            # A state change lost to a crash of the machine costs a resend with the same Idempotency-Key, which the
            # hub answers with the first entry (or the same approval).
            columns = ", ".join(f"{k} = ?" for k in changes)
            values = [json.dumps(v) if k == "error" else v for k, v in changes.items()]
            self._db.execute(f"UPDATE writes SET {columns} WHERE id = ?", (*values, rid))
            self._records[rid] = replace(r, **changes)
            self._committed += 1
            self._prune()
        if self._syncer is not None:
            self._wake.set()

    def _prune(self) -> None:
        """Forgets writes that are done once they outnumber the open ones (their rows left at the last open)."""
        records = list(self._records.items())
        done = [rid for rid, r in records if _finished(r, self._keep)]
        if len(done) > 2000 + 2 * (len(records) - len(done)):
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
