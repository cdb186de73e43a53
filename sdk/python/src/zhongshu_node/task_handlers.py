"""Task handlers that hand each task to something outside the node's process, as the CLI's ``run --exec`` and
``run --call`` do: a shell command (the task's JSON on stdin, its result as JSON on stdout) or a local HTTP endpoint
(the task's JSON POSTed, its result as the JSON answer). Both stop the work when ``ctx.cancelled`` is set (the
submitter canceled, the claim was lost, the node stops) and give up after a timeout. The same contract as the
TypeScript SDK's (docs/node-sdk.md, The CLI: working tasks)."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import threading
import time
from typing import Any, Dict, Optional
from urllib.parse import urlsplit

from .worker import TaskContext, TaskHandler

#: The most a command may print on stdout, or an endpoint answer: the hub takes a result of up to 1 MiB.
MAX_RESULT_BYTES = 1024 * 1024
#: How much of a command's stderr is kept for a failure's reason.
STDERR_TAIL_BYTES = 8 * 1024


def shell_task_handler(
    command: str, timeout_s: float = 600.0, kill_grace_s: float = 5.0, env: Optional[Dict[str, str]] = None
) -> TaskHandler:
    """Runs ``command`` with ``/bin/sh -c`` per task, in a process group of its own: the task's JSON on stdin; its id,
    type and attempt in ZHONGSHU_TASK_ID, ZHONGSHU_TASK_TYPE and ZHONGSHU_TASK_ATTEMPT. Exit 0 completes the task
    with stdout, a JSON object (empty stdout: ``{}``); another exit status fails it with the end of stderr as the
    reason. A cancel, a lost claim, a stop or the timeout sends SIGTERM to the group, then SIGKILL after
    ``kill_grace_s``; what the command left running in its group when it exits is killed too."""

    def handle(task: Dict[str, Any], ctx: TaskContext) -> Dict[str, Any]:
        if ctx.cancelled.is_set():
            raise RuntimeError("stopped before the command started")
        child_env = {
            **os.environ,
            **(env or {}),
            "ZHONGSHU_TASK_ID": str(task["task_id"]),
            "ZHONGSHU_TASK_TYPE": str(task.get("type", "")),
            "ZHONGSHU_TASK_ATTEMPT": str(task.get("attempts", "")),
        }
        try:
            child = subprocess.Popen(
                ["/bin/sh", "-c", command],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=child_env,
                start_new_session=True,  # its own process group, so a stop reaches what the command started too
            )
        except OSError as err:
            raise RuntimeError(f"the command could not start: {err}") from err

        def group(sig: int) -> None:
            try:
                os.killpg(child.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass  # the group is gone already

        stdout = bytearray()
        stderr = bytearray()
        stopped: Dict[str, str] = {}

        def feed() -> None:
            try:
                child.stdin.write(json.dumps(task).encode("utf-8"))
                child.stdin.close()
            except (BrokenPipeError, OSError):
                pass  # a command that does not read its stdin may exit before taking it all

        def read_stdout() -> None:
            while True:
                chunk = child.stdout.read1(65536)
                if not chunk:
                    return
                if len(stdout) + len(chunk) > MAX_RESULT_BYTES:
                    stopped.setdefault("why", "the command's output on stdout exceeded 1 MiB")
                    group(signal.SIGTERM)
                    continue
                stdout.extend(chunk)

        def read_stderr() -> None:
            while True:
                chunk = child.stderr.read1(65536)
                if not chunk:
                    return
                stderr.extend(chunk)
                del stderr[: max(0, len(stderr) - STDERR_TAIL_BYTES)]

        pipes = [threading.Thread(target=t, daemon=True) for t in (feed, read_stdout, read_stderr)]
        for t in pipes:
            t.start()
        deadline = time.monotonic() + timeout_s
        kill_at: Optional[float] = None
        while child.poll() is None:
            now = time.monotonic()
            if "why" not in stopped:
                if ctx.cancelled.is_set():
                    stopped["why"] = "the command was stopped (canceled, claim lost or node stopping)"
                elif now >= deadline:
                    stopped["why"] = f"the command timed out after {timeout_s:g} s"
            if "why" in stopped and kill_at is None:
                group(signal.SIGTERM)
                kill_at = now + kill_grace_s
            if kill_at is not None and now >= kill_at:
                group(signal.SIGKILL)
            time.sleep(0.05)
        # Whatever the command left in its group (a background job) ends with it, and so does its hold on stdout.
        group(signal.SIGKILL)
        for t in pipes:
            t.join()
        if "why" in stopped:
            raise RuntimeError(stopped["why"])
        code = child.returncode
        if code != 0:
            tail = last_lines(stderr.decode("utf-8", "replace"))
            status = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
            raise RuntimeError(f"the command {status}: {tail}" if tail else f"the command {status} (nothing on stderr)")
        try:
            return parse_result(stdout.decode("utf-8", "replace"), "its stdout")
        except ValueError as err:
            raise RuntimeError(f"the command exited with status 0, but {err}") from None

    return handle


def http_task_handler(url: str, timeout_s: float = 600.0) -> TaskHandler:
    """POSTs each task's JSON to ``url`` (headers X-Zhongshu-Task-Id and X-Zhongshu-Task-Type). A 2xx answer completes
    the task with its body, a JSON object (an empty body: ``{}``); any other answer fails it with the status and the
    start of the body. A cancel, a lost claim, a stop or the timeout shuts the connection down (the endpoint sees it
    close) and fails or stops the task at once. Redirects are not followed."""
    target = urlsplit(url)
    if target.scheme not in ("http", "https") or not target.hostname:
        raise ValueError(f"an http(s) URL, not {url}")
    path = (target.path or "/") + (f"?{target.query}" if target.query else "")

    def handle(task: Dict[str, Any], ctx: TaskContext) -> Dict[str, Any]:
        kind = http.client.HTTPSConnection if target.scheme == "https" else http.client.HTTPConnection
        conn = kind(target.hostname, target.port, timeout=timeout_s)
        outcome: Dict[str, Any] = {}

        def call() -> None:
            try:
                body = json.dumps(task).encode("utf-8")
                conn.request(
                    "POST",
                    path,
                    body=body,
                    headers={
                        "content-type": "application/json",
                        "accept": "application/json",
                        "x-zhongshu-task-id": str(task["task_id"]),
                        "x-zhongshu-task-type": str(task.get("type", "")),
                    },
                )
                res = conn.getresponse()
                data = res.read(MAX_RESULT_BYTES + 1)
                if len(data) > MAX_RESULT_BYTES:
                    raise ValueError("the answer exceeded 1 MiB")
                outcome["status"], outcome["text"] = res.status, data.decode("utf-8", "replace")
            except Exception as err:  # reported by the handler below, with what stopped it
                outcome["error"] = err

        def shut() -> None:
            """Ends the exchange at once: a shutdown wakes the blocked read and sends the endpoint a FIN."""
            sock = conn.sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            conn.close()

        thread = threading.Thread(target=call, daemon=True)
        thread.start()
        deadline = time.monotonic() + timeout_s
        while thread.is_alive():
            why = None
            if ctx.cancelled.wait(0.05):
                why = f"the request to {url} was stopped (canceled, claim lost or node stopping)"
            elif time.monotonic() >= deadline:
                why = f"{url} did not answer within {timeout_s:g} s"
            if why:
                shut()
                thread.join(2)
                raise RuntimeError(why)
        conn.close()
        if "error" in outcome:
            err = outcome["error"]
            if isinstance(err, socket.timeout):
                raise RuntimeError(f"{url} did not answer within {timeout_s:g} s")
            raise RuntimeError(f"{url}: could not reach it: {err}")
        status, text = outcome["status"], outcome["text"]
        if not 200 <= status <= 299:
            start = text.strip()[:500]
            raise RuntimeError(f"{url} answered {status}: {start}" if start else f"{url} answered {status}")
        try:
            return parse_result(text, "its answer")
        except ValueError as err:
            raise RuntimeError(f"{url} answered {status}, but {err}") from None

    return handle


def parse_result(text: str, what: str) -> Dict[str, Any]:
    """A result is a JSON object; nothing at all stands for ``{}``."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        raise ValueError(f"{what} is not JSON: {json.dumps(text.strip()[:200])}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{what} is JSON but not an object: {text.strip()[:200]}")
    return value


def last_lines(text: str) -> str:
    """The end of a command's stderr, for a failure's reason: its last lines, up to about 800 characters."""
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    kept = []
    length = 0
    for line in reversed(lines):
        if length >= 800:
            break
        kept.insert(0, line)
        length += len(line) + 3
    joined = " | ".join(kept)
    return f"…{joined[-800:]}" if len(joined) > 800 else joined
