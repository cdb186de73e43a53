"""Sends the outbox's pending writes to ``POST /api/report/truth`` (X-DID, the write's id as its
Idempotency-Key), a few at a time, and follows held writes (202) to their decision. While the hub is down,
overloaded (503) or over quota (429) every send waits: 1 s, 2 s, 4 s, ... capped, or the ``Retry-After`` the hub
gave when longer. A write the hub refuses for good (400, 413) fails; an identity refused (401, 403) pauses the
outbox instead, since the writes are fine and the operator can fix the DID."""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Dict, Optional, Set

from .http import Backoff, HubError, HubHttp, NetworkError, Wake, is_transient, retry_after_s
from .outbox import Outbox, OutboxRecord

DECISION_PREFIX = "hub.truth_approval."


class TruthWriter:
    def __init__(
        self,
        http: HubHttp,
        outbox: Outbox,
        did: str,
        log: logging.Logger,
        stop: threading.Event,
        on_change: Callable[[OutboxRecord], None],
        on_error: Callable[[Exception], None],
        concurrency: int = 4,
        max_backoff_s: float = 30.0,
        held_poll_s: float = 5.0,
    ):
        self.http, self.outbox, self.did, self.log = http, outbox, did, log
        self.on_change, self.on_error = on_change, on_error
        self.concurrency, self.held_poll_s = concurrency, held_poll_s
        self.stop = stop
        self.wake = Wake(stop)
        self.backoff = Backoff(1.0, max_backoff_s)
        self._mutex = threading.Lock()
        self._in_flight: Set[str] = set()
        self._paused_until = 0.0
        self._last_held_poll = 0.0
        self._identity_refused = False

    def kick(self) -> None:
        """New work: the loop looks at the outbox now."""
        self.wake.kick()

    def run(self) -> None:
        with ThreadPoolExecutor(self.concurrency, thread_name_prefix="zhongshu-send") as pool:
            while not self.stop.is_set():
                next_wake = 60.0
                now = time.monotonic()
                with self._mutex:
                    paused = now < self._paused_until
                    if paused:
                        next_wake = self._paused_until - now
                    free = self.concurrency - len(self._in_flight)
                    batch = [] if paused else self.outbox.take("pending", free, lambda r: r.id in self._in_flight)
                    self._in_flight.update(r.id for r in batch)
                for r in batch:
                    pool.submit(self._send_guarded, r)
                if self.outbox.counts()["held"] > 0:
                    due = self._last_held_poll + self.held_poll_s - time.monotonic()
                    if due <= 0:
                        self._follow_held()
                        self._last_held_poll = time.monotonic()
                        next_wake = min(next_wake, self.held_poll_s)
                    else:
                        next_wake = min(next_wake, due)
                self.wake.wait(next_wake)

    def _send_guarded(self, r: OutboxRecord) -> None:
        try:
            self._send(r)
        except Exception as err:  # e.g. the outbox's disk failing: told, never lost in a thread
            self.on_error(err)
        finally:
            with self._mutex:
                self._in_flight.discard(r.id)
            self.wake.kick()

    def _send(self, r: OutboxRecord) -> None:
        if self.stop.is_set():
            return
        self.outbox.attempted(r.id)
        body = {"key": r.key, "value": r.value}
        if r.truth_type is not None:
            body["truth_type"] = r.truth_type
        try:
            res = self.http.request(
                "POST", "/api/report/truth", body=body, headers={"x-did": self.did, "idempotency-key": r.id}
            )
        except NetworkError as err:
            if not self.stop.is_set():
                self._pause(None, f"truth write failed to reach the hub: {err}")
            return
        b = res.body if isinstance(res.body, dict) else {}
        if res.status == 200:
            self.backoff.reset()
            self._identity_refused = False
            self.outbox.acknowledge(r.id, b["seq"], b.get("event_id"))
            self._changed(r.id)
            return
        if res.status == 202:
            self.backoff.reset()
            self.outbox.hold(r.id, b["approval_id"], self._ledger_size())
            self.log.info("truth write held for approval id=%s approval_id=%s", r.id, b["approval_id"])
            self._changed(r.id)
            return
        if is_transient(res.status):
            self._pause(retry_after_s(res.headers), f"truth write deferred: {res.status} {b.get('error', '')}")
            return
        if res.status in (401, 403):
            if not self._identity_refused:
                self.on_error(
                    HubError(res.status, f"the hub refused the DID for truth writes: {b.get('message', '')}", b)
                )
            self._identity_refused = True
            self._pause(None, f"truth writes paused: DID refused ({res.status})")
            return
        self.outbox.fail(r.id, res.status, b.get("error"), str(b.get("message", res.text[:200])))
        self.log.warning("truth write refused id=%s status=%s code=%s", r.id, res.status, b.get("error"))
        self._changed(r.id)

    def _pause(self, retry_after: Optional[float], why: str) -> None:
        """Every send waits: the hub asked for it, or could not be reached."""
        with self._mutex:
            until = time.monotonic() + self.backoff.next(retry_after)
            if until > self._paused_until:
                self._paused_until = until
                self.log.warning(
                    "%s (retry in %.1f s, attempt %d)", why, until - time.monotonic(), self.backoff.attempts
                )

    def _ledger_size(self) -> Optional[int]:
        """The ledger's size now: a held write's decision is appended after it."""
        try:
            res = self.http.request("GET", "/api/status")
        except NetworkError:
            return None
        count = res.body.get("truth_count") if res.status == 200 and isinstance(res.body, dict) else None
        return count if isinstance(count, int) else None

    def _follow_held(self) -> None:
        """Looks for held writes' decisions in the ledger (``hub.truth_approval.<state>`` records carry the
        approval id): public reads, no quota spent, and it sees rejections and expiries as well as approvals."""
        held = self.outbox.take("held", 1 << 30)
        by_approval: Dict[str, OutboxRecord] = {r.approval_id: r for r in held if r.approval_id}
        after = min((r.held_after or 0) for r in held) if held else 0
        try:
            for _ in range(20):
                if not by_approval:
                    break
                res = self.http.request("GET", f"/api/sub-l0?after={after}&limit=500")
                entries = res.body.get("entries") if res.status == 200 and isinstance(res.body, dict) else None
                if not isinstance(entries, list):
                    return
                for e in entries:
                    key = e.get("key")
                    if e.get("kind") != "event" or not isinstance(key, str) or not key.startswith(DECISION_PREFIX):
                        continue
                    value = e.get("value") or {}
                    r = by_approval.get(value.get("approval_id"))
                    if r is None:
                        continue
                    state = key[len(DECISION_PREFIX) :]
                    if state == "approved" and isinstance(value.get("seq"), int):
                        self.outbox.decide(r.id, "acknowledged", value["seq"])
                    elif state in ("rejected", "expired"):
                        self.outbox.decide(r.id, state)
                    else:
                        continue
                    self.log.info("held truth write decided id=%s approval_id=%s state=%s", r.id, r.approval_id, state)
                    del by_approval[r.approval_id]
                    self._changed(r.id)
                after = res.body.get("next_cursor", after)
                if len(entries) < 500:
                    break
            # Where to look next time (stored only when it moved, so a quiet ledger costs no fsync).
            for r in by_approval.values():
                if isinstance(after, int) and after > (r.held_after or 0):
                    self.outbox.hold(r.id, r.approval_id, after)
        except NetworkError as err:
            if not self.stop.is_set():
                self.log.warning("could not follow held writes: %s", err)

    def _changed(self, rid: str) -> None:
        r = self.outbox.get(rid)
        if r:
            self.on_change(r)
