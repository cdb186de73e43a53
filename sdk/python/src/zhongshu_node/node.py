"""HubNode: one node of the hub, as an application holds it. ``start()`` joins (registers or adopts saved
credentials), then heartbeats, sends the outbox, verifies what landed and works tasks, each in a thread of its
own; ``write()`` only stores the write in the durable outbox and returns; ``stop()`` ends every thread. What
happens is told through callbacks registered with ``on(event, callback)``: ``state``, ``heartbeat``, ``write`` (a
write changed state), ``verified``, ``checkpoint``, ``task``, ``error``."""

from __future__ import annotations

import logging
import os
import re
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple
from urllib.parse import quote

from .checkpoint import Checkpoint
from .http import HubError, HubHttp
from .outbox import Outbox, OutboxRecord
from .presence import Presence
from .truth_writer import TruthWriter
from .verifier import LedgerVerifier
from .worker import TaskHandler, TaskWorker

_KEY = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_:+-]+)+$")
EVENTS = ("state", "heartbeat", "write", "verified", "checkpoint", "task", "error")


@dataclass(frozen=True)
class WriteOutcome:
    """How a write ended: ``acknowledged`` (with its seq), or a held write's decision (``rejected``, ``expired``)."""

    state: str
    id: str
    seq: Optional[int] = None
    event_id: Optional[str] = None
    approval_id: Optional[str] = None


class WriteRefused(HubError):
    """The hub refused a write for good (400, 413): it is ``failed`` in the outbox."""


class WriteHandle:
    """A write just made: ``id`` (also its Idempotency-Key), ``result(timeout)`` waits for its outcome,
    ``future`` (a concurrent.futures.Future: ``asyncio.wrap_future`` awaits it), ``state()`` reads the outbox,
    ``add_done_callback(fn)`` calls ``fn(outcome)`` once it settles."""

    def __init__(self, rid: str, future: "Future[WriteOutcome]", outbox: Outbox):
        self.id, self.future, self._outbox = rid, future, outbox

    def result(self, timeout: Optional[float] = None) -> WriteOutcome:
        return self.future.result(timeout)

    def done(self) -> bool:
        return self.future.done()

    def state(self) -> Optional[str]:
        r = self._outbox.get(self.id)
        return r.state if r else None

    def add_done_callback(self, fn: Callable[[WriteOutcome], None]) -> None:
        self.future.add_done_callback(lambda f: None if f.exception() else fn(f.result()))


class HubNode:
    def __init__(
        self,
        hub_url: str,
        state_dir: str,
        did: Optional[str] = None,
        register: Optional[Dict[str, Any]] = None,
        credentials: Optional[Dict[str, str]] = None,
        heartbeat: bool = True,
        heartbeat_interval_s: Optional[float] = None,
        offline_after_s: Optional[float] = None,
        report: Optional[Callable[[], Dict[str, Any]]] = None,
        verifier_key: Optional[str] = None,
        witnesses: Optional[List[str]] = None,
        witness_quorum: Optional[int] = None,
        worker: Optional[TaskHandler] = None,
        max_tasks: int = 1,
        task_poll_s: float = 5.0,
        verify: bool = True,
        verify_interval_s: float = 10.0,
        keep_unverified: Optional[bool] = None,
        concurrency: int = 4,
        max_backoff_s: float = 30.0,
        held_poll_s: float = 5.0,
        request_timeout_s: float = 10.0,
        sync: str = "group",
        logger: Optional[logging.Logger] = None,
        transport: Any = None,
    ):
        """``hub_url``: the hub's main listener. ``state_dir``: credentials (0600), the outbox and the last
        checkpoint; one directory per node. ``did``: the DID truth writes are made with (X-DID). ``register`` (name,
        brand, instance, capabilities, and a ``did`` to link to the node at registration: registered on the hub and
        linked to no node) when ``state_dir`` holds no credentials, or ``credentials`` (node_id,
        api_key) issued earlier. ``verifier_key``: the checkpoint key to pin (GET /tlog/verifier-key, out of band).
        ``witnesses``: the hub's witnesses' cosignature keys to require (GET /tlog/witness-key of each, out of band),
        ``witness_quorum`` of them (default: all) on a checkpoint before it proves anything.
        ``worker``: a handler ``(task, ctx) -> result`` to claim and run tasks."""
        self.log = logger or logging.getLogger("zhongshu_node")
        self.did = did
        self._heartbeat = heartbeat
        self._stop = threading.Event()
        self._listeners: Dict[str, List[Callable[..., None]]] = {e: [] for e in EVENTS}
        self._waiting: Dict[str, Future] = {}
        self._waiting_lock = threading.Lock()
        self._threads: List[threading.Thread] = []
        self._started = False
        self.http = HubHttp(hub_url, request_timeout_s, transport)
        do_verify = verify and did is not None
        self.outbox = Outbox(
            os.path.join(state_dir, "outbox.sqlite"),
            sync=sync,
            keep_until_verified=do_verify if keep_unverified is None else keep_unverified,
        )
        self.presence = Presence(
            self.http,
            os.path.join(state_dir, "credentials.json"),
            self.log,
            on_state=lambda s, p: self._emit("state", s, p),
            on_heartbeat=lambda a: self._emit("heartbeat", a),
            on_error=self._fail,
            register=register,
            credentials=credentials,
            heartbeat_interval_s=heartbeat_interval_s,
            offline_after_s=offline_after_s,
            max_backoff_s=max_backoff_s,
            report=report,
        )
        self.writer = (
            TruthWriter(
                self.http,
                self.outbox,
                did,
                self.log,
                self._stop,
                self._settle,
                self._fail,
                concurrency=concurrency,
                max_backoff_s=max_backoff_s,
                held_poll_s=held_poll_s,
            )
            if did
            else None
        )
        self.verifier = (
            LedgerVerifier(
                self.http,
                self.outbox,
                did,
                os.path.join(state_dir, "verifier-key"),
                os.path.join(state_dir, "checkpoint"),
                self.log,
                self._stop,
                on_verified=lambda r, cp: self._emit("verified", r, cp),
                on_checkpoint=lambda cp: self._emit("checkpoint", cp),
                on_error=self._fail,
                verifier_key=verifier_key,
                interval_s=verify_interval_s,
                witnesses=witnesses,
                witness_quorum=witness_quorum,
            )
            if do_verify
            else None
        )
        self.worker = (
            TaskWorker(
                self.http,
                self.presence.auth_headers,
                worker,
                self.log,
                self._stop,
                on_task=lambda e: self._emit("task", e),
                max_tasks=max_tasks,
                poll_s=task_poll_s,
                max_backoff_s=max_backoff_s,
            )
            if worker
            else None
        )

    # -- events -------------------------------------------------------------------------------------------------

    def on(self, event: str, callback: Callable[..., None]) -> "HubNode":
        if event not in self._listeners:
            raise ValueError(f"no event {event!r}: one of {', '.join(EVENTS)}")
        self._listeners[event].append(callback)
        return self

    def _emit(self, event: str, *args: Any) -> None:
        for cb in list(self._listeners[event]):
            try:
                cb(*args)
            except Exception as err:  # a listener's bug must not stop a loop
                self.log.error("a %s listener failed: %s", event, err)

    def _fail(self, err: Exception) -> None:
        """Errors go to ``error`` listeners; with none they are logged, never lost in a thread."""
        if self._listeners["error"]:
            self._emit("error", err)
        else:
            self.log.error("%s: %s", type(err).__name__, err)

    # -- life ---------------------------------------------------------------------------------------------------

    def start(self) -> "HubNode":
        """Joins (unless ``heartbeat=False``) and starts the threads; returns once the node has its credentials."""
        if self._started:
            return self
        self._started = True
        if self._heartbeat:
            self.presence.join(self._stop)
            self._spawn("heartbeat", lambda: self.presence.run(self._stop))
            if self.worker:
                self._spawn("worker", self.worker.run)
        elif self.worker:
            raise ValueError("the worker needs the node to join (heartbeat=True)")
        if self.writer:
            self._spawn("outbox", self.writer.run)
        if self.verifier:
            self._spawn("verifier", self.verifier.run)
        return self

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        def guarded() -> None:
            try:
                target()
            except Exception as err:  # a loop that ends with an error reports it and stops
                self._fail(err)

        t = threading.Thread(target=guarded, name=f"zhongshu-{name}", daemon=True)
        self._threads.append(t)
        t.start()

    def stop(self) -> None:
        """Stops every thread (requests in flight end within the request timeout) and closes the outbox; pending
        writes wait for the next start."""
        self._stop.set()
        for part in (self.writer, self.verifier, self.worker):
            if part:
                part.wake.kick()
        for t in self._threads:
            t.join()
        self.outbox.close()
        self.http.close()
        with self._waiting_lock:
            waiting, self._waiting = self._waiting, {}
        for rid, f in waiting.items():
            if not f.done():
                f.set_exception(RuntimeError(f"the node stopped before write {rid} settled"))

    def __enter__(self) -> "HubNode":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def state(self) -> str:
        return self.presence.state

    @property
    def node_id(self) -> Optional[str]:
        return self.presence.node_id

    # -- truth writes -------------------------------------------------------------------------------------------

    def write(self, key: str, value: Dict[str, Any], truth_type: Optional[str] = None) -> WriteHandle:
        """Records a truth: stores it in the outbox and returns; no network I/O happens in this call, and (with the
        default ``sync="group"``) no wait for the disk either: ``flush()`` waits for that."""
        if not self.writer:
            raise RuntimeError("no DID given: truth writes need one (HubNode(did=...))")
        # The hub's key rules (docs/ledger.md, Writing), checked here so a bad key fails the call, not the outbox.
        if (
            not isinstance(key, str)
            or len(key) > 256
            or not _KEY.match(key)
            or key.lower().startswith("truth-")
            or key.startswith("hub.")
        ):
            raise ValueError(
                "a truth key is <namespace>.<key>: dot-separated segments of letters, digits, _ - : +, at most 256"
                " characters, not starting with 'truth-' or 'hub.'"
            )
        if not isinstance(value, dict):
            raise ValueError("a truth value is a JSON object")
        record = self.outbox.enqueue(key, value, truth_type)
        future: "Future[WriteOutcome]" = Future()
        with self._waiting_lock:
            self._waiting[record.id] = future
        if self._started:
            self.writer.kick()
        return WriteHandle(record.id, future, self.outbox)

    def flush(self, timeout_s: Optional[float] = None) -> bool:
        """Waits until every write() made so far is on the disk (it then survives a crash of the machine, not only of
        the node); False when ``timeout_s`` passed first."""
        return self.outbox.flush(timeout_s)

    def writes(self) -> List[OutboxRecord]:
        """The outbox's writes (pending, held, acknowledged and not yet verified, ...), oldest first."""
        return self.outbox.list()

    def _settle(self, r: OutboxRecord) -> None:
        self._emit("write", r)
        if r.state in ("held", "pending"):
            return
        with self._waiting_lock:
            future = self._waiting.pop(r.id, None)
        if r.state == "acknowledged":
            if self.verifier:
                self.verifier.kick()
            outcome: Any = WriteOutcome("acknowledged", r.id, seq=r.seq, event_id=r.event_id)
        elif r.state in ("rejected", "expired"):
            outcome = WriteOutcome(r.state, r.id, approval_id=r.approval_id)
        else:
            error = r.error or {}
            outcome = WriteRefused(error.get("status", 0), f"truth write {r.id} refused: {error.get('message', '')}")
        if future is not None and not future.done():
            if isinstance(outcome, Exception):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)

    # -- verification, status, instructions ---------------------------------------------------------------------

    def verify_now(self) -> Tuple[Checkpoint, int]:
        """Proves now what the current checkpoint covers (also done in the background); raises VerificationError."""
        if not self.verifier:
            raise RuntimeError("verification is off (no DID, or verify=False)")
        return self.verifier.round()

    def status(self) -> Dict[str, Any]:
        """Step 3 of the onboarding: the hub's status (ledger size, root, signed tree head)."""
        res = self.http.request("GET", "/api/status")
        if res.status != 200:
            raise HubError(res.status, f"GET /api/status answered {res.status}", res.body)
        return res.body

    def instructions(self, include_acked: bool = False) -> List[Dict[str, Any]]:
        """Step 3 of the onboarding: the node's instruction queue (work orders; X-DID)."""
        if not self.did or not self.node_id:
            raise RuntimeError("instructions need a DID and a joined node")
        q = "?include_acked=true" if include_acked else ""
        res = self.http.request(
            "GET", f"/api/instructions/{quote(self.node_id, safe='')}{q}", headers={"x-did": self.did}
        )
        if res.status != 200:
            message = res.body.get("message", res.status) if isinstance(res.body, dict) else res.status
            raise HubError(res.status, f"instructions: {message}", res.body)
        return res.body["instructions"]

    def ack_instruction(self, instruction_id: str) -> Dict[str, Any]:
        """Acknowledges a work order of the node's queue (``inbox_ack``; the DID must be the node's)."""
        if not self.did:
            raise RuntimeError("acknowledging instructions needs a DID")
        res = self.http.request(
            "POST", "/dal/deploy", body={"action": "inbox_ack", "id": instruction_id}, headers={"x-did": self.did}
        )
        if res.status != 200:
            message = res.body.get("message", res.status) if isinstance(res.body, dict) else res.status
            raise HubError(res.status, f"inbox_ack: {message}", res.body)
        return res.body
