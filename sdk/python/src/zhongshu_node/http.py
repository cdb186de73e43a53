"""The SDK's one way to the hub: JSON over httpx, each request bounded by a timeout, with the waits the hub asks
for (``Retry-After``) and the seed's backoff (1 s, 2 s, 4 s, ... capped, with jitter). Credentials travel in
headers the SDK never logs."""

from __future__ import annotations

import email.utils
import json
import random
import threading
import time
from dataclasses import dataclass
from typing import Any, Mapping, Optional

import httpx


class NetworkError(Exception):
    """The request never got an answer (connection refused or reset, timeout)."""


class HubError(Exception):
    """An answer the SDK cannot go on with; ``code`` is the hub's error code when it sent one."""

    def __init__(self, status: int, message: str, body: Any = None):
        super().__init__(message)
        self.status = status
        self.code: Optional[str] = None
        if isinstance(body, dict):
            for name in ("error", "code"):
                if isinstance(body.get(name), str):
                    self.code = body[name]
                    break


@dataclass
class HubAnswer:
    status: int
    headers: httpx.Headers
    text: str
    body: Any  # the parsed JSON body, or None


class HubHttp:
    """A thread-safe JSON client of one hub (one connection pool shared by every loop of the node)."""

    def __init__(self, base_url: str, timeout_s: float = 10.0, transport: Optional[httpx.BaseTransport] = None):
        self.base_url = base_url.rstrip("/")
        self._client = httpx.Client(timeout=timeout_s, transport=transport)
        self.requests = 0  # how many requests were started (tests check write() starts none)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: Optional[Mapping[str, str]] = None,
    ) -> HubAnswer:
        sent = {"accept": "application/json", **(headers or {})}
        content = None
        if body is not None:
            sent["content-type"] = "application/json"
            content = json.dumps(body, ensure_ascii=False).encode("utf-8")
        self.requests += 1
        try:
            res = self._client.request(method, self.base_url + path, content=content, headers=sent)
        except httpx.TimeoutException:
            raise NetworkError(f"{method} {path}: timed out") from None
        except httpx.HTTPError as err:
            # Only the error's class and text: never the request (its headers hold credentials).
            raise NetworkError(f"{method} {path}: {type(err).__name__} {err}") from None
        text = res.text
        try:
            parsed = json.loads(text) if text else None
        except ValueError:
            parsed = None
        return HubAnswer(res.status_code, res.headers, text, parsed)

    def close(self) -> None:
        self._client.close()


def retry_after_s(headers: Mapping[str, str], now: Optional[float] = None) -> Optional[float]:
    """``Retry-After`` in seconds (a number of seconds or an HTTP date); None when absent or unreadable."""
    value = headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        at = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, at - (time.time() if now is None else now))


def is_transient(status: int) -> bool:
    """Answers that mean "later", not "never": the hub is busy, down or restarting."""
    return status in (408, 429) or status >= 500


class Backoff:
    """The seed's exponential backoff: 1 s, 2 s, 4 s, ... up to ``cap_s``, each with up to ``jitter`` of itself
    added, so a fleet coming back after an outage does not beat in step. A longer ``Retry-After`` wins."""

    def __init__(self, base_s: float = 1.0, cap_s: float = 30.0, jitter: float = 0.1):
        self.base_s, self.cap_s, self.jitter = base_s, cap_s, jitter
        self.attempts = 0

    def next(self, retry_after: Optional[float] = None) -> float:
        exp = min(self.cap_s, self.base_s * 2 ** min(self.attempts, 30))
        self.attempts += 1
        delay = exp + exp * self.jitter * random.random()
        return delay if retry_after is None else max(retry_after, delay)

    def reset(self) -> None:
        self.attempts = 0


class Wake:
    """A loop's sleep that other code can cut short (new work arrived) and that a stop ends at once."""

    def __init__(self, stop: threading.Event):
        self._stop = stop
        self._cond = threading.Condition()
        self._kicked = False

    def kick(self) -> None:
        with self._cond:
            self._kicked = True
            self._cond.notify_all()

    def wait(self, seconds: float) -> None:
        with self._cond:
            if not self._kicked and not self._stop.is_set():
                self._cond.wait(max(0.0, seconds))
            self._kicked = False
