"""Joining the hub and staying alive: registration (or adopting saved credentials), then heartbeats on the hub's
schedule with jitter, backing off 1 s, 2 s, 4 s, ... (capped) while they fail and waiting as long as
``Retry-After`` asks on 429/503. The node's state (pending_review, online, offline, rejected) comes from the hub's
answers; when no heartbeat got through for the offline window, the node knows the hub judges it offline."""

from __future__ import annotations

import logging
import random
import threading
import time
from datetime import datetime, timezone
from typing import Any, Callable, Dict, Optional

from .credentials import NodeCredentials, load_credentials, save_credentials
from .http import Backoff, HubError, HubHttp, NetworkError, is_transient, retry_after_s


class Presence:
    def __init__(
        self,
        http: HubHttp,
        credentials_file: str,
        log: logging.Logger,
        on_state: Callable[[str, str], None],
        on_heartbeat: Callable[[Dict[str, Any]], None],
        on_error: Callable[[Exception], None],
        register: Optional[Dict[str, Any]] = None,
        credentials: Optional[Dict[str, str]] = None,
        heartbeat_interval_s: Optional[float] = None,
        offline_after_s: Optional[float] = None,
        max_backoff_s: float = 30.0,
        report: Optional[Callable[[], Dict[str, Any]]] = None,
    ):
        self.http, self.credentials_file, self.log = http, credentials_file, log
        self.on_state, self.on_heartbeat, self.on_error = on_state, on_heartbeat, on_error
        self.register, self.given = register, credentials
        self._interval_given = heartbeat_interval_s is not None
        self._offline_given = offline_after_s is not None
        self.interval_s = heartbeat_interval_s or 30.0
        self.offline_after_s = offline_after_s or 90.0
        self.max_backoff_s = max_backoff_s
        self.report = report
        self.state = "unknown"
        self.credentials: Optional[NodeCredentials] = None
        self.backoff = Backoff(1.0, max_backoff_s)
        self._last_ok = 0.0

    @property
    def node_id(self) -> Optional[str]:
        return self.credentials["node_id"] if self.credentials else None

    def auth_headers(self) -> Dict[str, str]:
        """Headers proving the node's identity (they hold the key: never log them)."""
        if not self.credentials:
            raise RuntimeError("the node has not joined")
        return {"x-external-node": self.credentials["node_id"], "x-external-key": self.credentials["api_key"]}

    def join(self, stop: threading.Event) -> Dict[str, Any]:
        """Loads, adopts or registers the node's credentials; retries registration while the hub is busy or down."""
        saved = load_credentials(self.credentials_file)
        if saved:
            if saved["hub_url"] != self.http.base_url:
                raise ValueError(
                    f"{self.credentials_file} holds credentials of {saved['hub_url']}, not of {self.http.base_url}"
                )
            self.credentials = saved
            self.log.info("node credentials loaded node_id=%s", saved["node_id"])
            return {"node_id": saved["node_id"], "registered": False}
        if self.given:
            self.credentials = {
                "hub_url": self.http.base_url,
                "node_id": self.given["node_id"],
                "api_key": self.given["api_key"],
            }
            save_credentials(self.credentials_file, self.credentials)
            self.log.info("node credentials adopted node_id=%s", self.given["node_id"])
            return {"node_id": self.given["node_id"], "registered": False}
        if not self.register:
            raise ValueError(f"no credentials in {self.credentials_file} and nothing to register with")
        backoff = Backoff(1.0, self.max_backoff_s)
        body = {**self.register, "brand": self.register.get("brand") or {"code": "custom"}}
        while True:
            if stop.is_set():
                raise RuntimeError("stopped before the node registered")
            try:
                res = self.http.request("POST", "/a2a/register", body=body)
            except NetworkError as err:
                wait = backoff.next()
                self.log.warning("registration failed to reach the hub: %s (retry in %.1f s)", err, wait)
                stop.wait(wait)
                continue
            if res.status == 201:
                b = res.body
                self.credentials = {
                    "hub_url": self.http.base_url,
                    "node_id": b["node_id"],
                    "api_key": b["api_key"],
                    "registered_at": datetime.now(timezone.utc).isoformat(),
                }
                save_credentials(self.credentials_file, self.credentials)
                hb = b.get("heartbeat") or {}
                if not self._interval_given and (hb.get("recommended_interval_s") or 0) > 0:
                    self.interval_s = float(hb["recommended_interval_s"])
                if not self._offline_given and (hb.get("offline_after_s") or 0) > 0:
                    self.offline_after_s = float(hb["offline_after_s"])
                self.log.info("node registered node_id=%s state=%s", b["node_id"], b.get("state"))
                self._set_state(b.get("state"))
                return {"node_id": b["node_id"], "registered": True}
            if not is_transient(res.status):
                message = res.body.get("message", "") if isinstance(res.body, dict) else ""
                raise HubError(res.status, f"registration refused: {res.status} {message}", res.body)
            wait = backoff.next(retry_after_s(res.headers))
            self.log.warning("registration deferred: %s (retry in %.1f s)", res.status, wait)
            stop.wait(wait)

    def run(self, stop: threading.Event) -> None:
        """Beats until ``stop`` is set or the node is rejected."""
        self._last_ok = time.monotonic()
        while not stop.is_set():
            wait = self._beat(stop)
            if self.state == "rejected":
                self.log.warning("the node was rejected: heartbeats stop")
                return
            if self.state == "online" and time.monotonic() - self._last_ok > self.offline_after_s:
                self._set_state("offline")
            stop.wait(wait)

    def _beat(self, stop: threading.Event) -> float:
        """One heartbeat; answers how long to wait before the next."""
        try:
            body = (self.report() if self.report else None) or {}
            res = self.http.request("POST", "/a2a/heartbeat", body=body, headers=self.auth_headers())
        except NetworkError as err:
            if stop.is_set():
                return 0
            wait = self.backoff.next()
            self.log.warning("heartbeat failed to reach the hub: %s (retry in %.1f s)", err, wait)
            return wait
        b = res.body if isinstance(res.body, dict) else {}
        if res.status == 200:
            self.backoff.reset()
            self._last_ok = time.monotonic()
            self._set_state(b.get("state"))
            self.on_heartbeat({"state": b.get("state"), "received_at": b.get("received_at")})
            if b.get("ignored_fields"):
                self.log.warning("the hub ignored heartbeat fields: %s", b["ignored_fields"])
            return self.interval_s * (0.9 + 0.2 * random.random())
        if res.status == 403:
            self._set_state("rejected")
            self.on_error(HubError(403, f"heartbeat refused: {b.get('message', 'forbidden')}", b))
            return 0
        wait = self.backoff.next(retry_after_s(res.headers))
        if not is_transient(res.status):
            self.on_error(HubError(res.status, f"heartbeat refused: {b.get('message', res.status)}", b))
        self.log.warning("heartbeat not accepted: %s (retry in %.1f s)", res.status, wait)
        return wait

    def _set_state(self, new: Optional[str]) -> None:
        if not isinstance(new, str) or new == self.state:
            return
        previous, self.state = self.state, new
        self.log.info("node state %s (was %s)", new, previous)
        self.on_state(new, previous)
