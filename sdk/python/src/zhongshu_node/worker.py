"""The worker loop: claims queued tasks whose required capabilities the node declared (``POST /api/task/assign``,
only while the node is online), runs the application's handler for each in a thread, renews the lease while it
runs (``POST /api/task/<id>/progress`` every third of the lease, which also says when the submitter canceled), and
reports the outcome (``complete`` with the handler's result, ``fail`` with its error's message). A canceled task or
a lost claim (409: the lease lapsed and someone else holds it) sets the handler's ``cancelled`` event and reports
nothing. While it works, a handler may send A2A artifacts (``ctx.artifact``) and ask the submitter for more
(``ctx.ask_for_input``: the task waits without a lease; the answer hands it back to this node with the conversation
in ``task["history"]``). It completes with a result, or with a ``TaskCompletion``: a result, artifacts and a
Message as the answer (the TypeScript SDK's worker does the same; docs/a2a.md, the node API)."""

from __future__ import annotations

import logging
import re
import threading
from typing import Any, Callable, Dict, List, Optional, Union
from urllib.parse import quote

from .http import Backoff, HubHttp, NetworkError, Wake, is_transient, retry_after_s


Message = Union[str, Dict[str, Any]]


def as_message(message: Message) -> Dict[str, Any]:
    """A Message for the hub: a string is one text part; a dict is sent as it is (``parts``, ``metadata``)."""
    return {"parts": [{"text": message}]} if isinstance(message, str) else message


class TaskCompletion:
    """What a handler may return instead of a plain result: any of a result, A2A artifacts (dicts in A2A's JSON
    names: ``artifactId``, ``parts``…) and a Message as the answer."""

    def __init__(
        self,
        result: Optional[Dict[str, Any]] = None,
        artifacts: Optional[List[Dict[str, Any]]] = None,
        message: Optional[Message] = None,
    ):
        if result is None and artifacts is None and message is None:
            raise TypeError("a TaskCompletion has a result, artifacts or a message")
        self.result, self.artifacts, self.message = result, artifacts, message

    def body(self) -> Dict[str, Any]:
        body: Dict[str, Any] = {}
        if self.result is not None:
            body["result"] = self.result
        if self.artifacts is not None:
            body["artifacts"] = self.artifacts
        if self.message is not None:
            body["message"] = as_message(self.message)
        return body


class TaskContext:
    """What a handler gets beside its task: ``cancelled`` is set when the submitter cancels, the claim is lost, the
    node stops (stop working then) or the handler asked for input; ``progress(note)`` reports progress and renews the
    lease; ``artifact(artifact, append=False, last_chunk=True)`` sends an artifact or a chunk of one;
    ``ask_for_input(question=None)`` asks the submitter for more and sets ``cancelled`` (return: nothing more is
    reported this turn)."""

    def __init__(
        self,
        cancelled: threading.Event,
        progress: Callable[[Optional[str]], None],
        artifact: Optional[Callable[[Dict[str, Any], bool, bool], None]] = None,
        ask_for_input: Optional[Callable[[Optional[Message]], None]] = None,
    ):
        self.cancelled = cancelled
        self._progress, self._artifact, self._ask = progress, artifact, ask_for_input

    def progress(self, note: Optional[str] = None) -> None:
        self._progress(note)

    def artifact(self, artifact: Dict[str, Any], append: bool = False, last_chunk: bool = True) -> None:
        if self._artifact is None:
            raise RuntimeError("artifacts are sent from a task the worker claimed")
        self._artifact(artifact, append, last_chunk)

    def ask_for_input(self, question: Optional[Message] = None) -> None:
        if self._ask is None:
            raise RuntimeError("input is asked for from a task the worker claimed")
        self._ask(question)


TaskHandler = Callable[[Dict[str, Any], TaskContext], Union[Dict[str, Any], TaskCompletion]]


class TaskWorker:
    def __init__(
        self,
        http: HubHttp,
        auth_headers: Callable[[], Dict[str, str]],
        handler: TaskHandler,
        log: logging.Logger,
        stop: threading.Event,
        on_task: Callable[[Dict[str, Any]], None],
        max_tasks: int = 1,
        poll_s: float = 5.0,
        max_backoff_s: float = 30.0,
    ):
        self.http, self.auth_headers, self.handler, self.log, self.stop = http, auth_headers, handler, log, stop
        self.on_task, self.max_tasks, self.poll_s = on_task, max_tasks, poll_s
        self.backoff = Backoff(1.0, max_backoff_s)
        self.wake = Wake(stop)
        self._running: Dict[str, threading.Thread] = {}
        self._mutex = threading.Lock()

    def run(self) -> None:
        while not self.stop.is_set():
            wait = self.poll_s
            with self._mutex:
                free = self.max_tasks - len(self._running)
            if free > 0:
                try:
                    res = self.http.request(
                        "POST", "/api/task/assign", body={"max_tasks": free}, headers=self.auth_headers()
                    )
                    if res.status == 200:
                        self.backoff.reset()
                        for task in res.body["tasks"]:
                            self._start(task, float(res.body.get("lease_s") or 30))
                        if res.body["tasks"]:
                            wait = 0
                    elif is_transient(res.status):
                        wait = self.backoff.next(retry_after_s(res.headers))
                    else:
                        # 403 while the node is pending review or offline: ask again at the next poll.
                        code = res.body.get("error") if isinstance(res.body, dict) else None
                        self.log.debug("no claim: %s %s", res.status, code)
                except NetworkError:
                    if self.stop.is_set():
                        break
                    wait = self.backoff.next()
            self.wake.wait(wait)
        with self._mutex:
            threads = list(self._running.values())
        for t in threads:
            t.join()

    def _start(self, task: Dict[str, Any], lease_s: float) -> None:
        t = threading.Thread(
            target=self._work_guarded, args=(task, lease_s), daemon=True, name=f"task-{task['task_id']}"
        )
        with self._mutex:
            self._running[task["task_id"]] = t
        t.start()

    def _work_guarded(self, task: Dict[str, Any], lease_s: float) -> None:
        try:
            self._work(task, lease_s)
        except Exception as err:
            self.log.error("task worker failed task_id=%s: %s", task["task_id"], err)
        finally:
            with self._mutex:
                self._running.pop(task["task_id"], None)
            self.wake.kick()

    def _event(self, task: Dict[str, Any], state: str, **more: Any) -> None:
        self.on_task({"task_id": task["task_id"], "type": task.get("type"), "state": state, **more})

    def _work(self, task: Dict[str, Any], lease_s: float) -> None:
        tid = quote(task["task_id"], safe="")
        cancelled = threading.Event()  # canceled, lost or stopped: the handler stops
        ended = threading.Event()  # the handler finished: the renewals stop
        outcome: Dict[str, str] = {}

        def send(path: str, body: Dict[str, Any]):
            res = self.http.request("POST", f"/api/task/{tid}/{path}", body=body, headers=self.auth_headers())
            if res.status in (404, 409):
                outcome.setdefault("state", "lost")
                cancelled.set()
            elif res.status != 200 and path != "progress":
                message = res.body.get("message", "") if isinstance(res.body, dict) else ""
                raise HubRefused(f"the hub refused {path}: {res.status} {message}")
            return res

        def progress(note: Optional[str] = None) -> None:
            line = "" if note is None else one_line(note, 500)
            res = send("progress", {"note": line} if line else {})
            if res.status == 200 and isinstance(res.body, dict) and res.body.get("canceled"):
                outcome.setdefault("state", "canceled")
                cancelled.set()

        def artifact(artifact: Dict[str, Any], append: bool, last_chunk: bool) -> None:
            send("artifact", {"artifact": artifact, "append": append, "last_chunk": last_chunk})

        def ask_for_input(question: Optional[Message]) -> None:
            res = send("input-required", {} if question is None else {"message": as_message(question)})
            if res.status == 200:
                outcome.setdefault("state", "input_required")
                cancelled.set()

        def renew() -> None:
            every = max(0.5, lease_s / 3)
            while not (ended.wait(every) or cancelled.is_set() or self.stop.is_set()):
                try:
                    progress()
                except NetworkError as err:
                    self.log.warning("lease renewal failed task_id=%s: %s", task["task_id"], err)

        def on_stop() -> None:
            while not (ended.is_set() or cancelled.is_set()):
                if self.stop.wait(0.2):
                    cancelled.set()

        renewals = threading.Thread(target=renew, daemon=True)
        watcher = threading.Thread(target=on_stop, daemon=True)
        renewals.start()
        watcher.start()
        self._event(task, "claimed")
        result: Union[Dict[str, Any], TaskCompletion, None] = None
        failure: Optional[str] = None
        try:
            result = self.handler(task, TaskContext(cancelled, progress, artifact, ask_for_input))
        except Exception as err:
            failure = str(err) or type(err).__name__
        finally:
            ended.set()
            renewals.join()
            watcher.join()
        if self.stop.is_set():
            return  # the lease lapses and the hub queues the task again
        if outcome:
            self._event(task, outcome["state"])
            return
        if failure is None:
            done = result.body() if isinstance(result, TaskCompletion) else {"result": result or {}}
            path, body = f"/api/task/{tid}/complete", done
        else:
            path, body = f"/api/task/{tid}/fail", {"reason": one_line(failure, 1000) or "failed"}
        backoff = Backoff(1.0, 8.0)
        for _ in range(5):
            if self.stop.is_set():
                return
            try:
                res = self.http.request("POST", path, body=body, headers=self.auth_headers())
            except NetworkError:
                self.stop.wait(backoff.next())
                continue
            if res.status == 200:
                if failure is None:
                    self._event(task, "done")
                else:
                    self._event(task, "failed", reason=failure)
                return
            if res.status in (404, 409):
                self._event(task, "lost")
                return
            if not is_transient(res.status):
                message = res.body.get("message", "") if isinstance(res.body, dict) else ""
                reason = f"the hub refused the outcome: {res.status} {message}"
                self.log.warning("%s task_id=%s", reason, task["task_id"])
                self._event(task, "failed", reason=reason)
                return
            self.stop.wait(backoff.next(retry_after_s(res.headers)))
        self.log.warning("could not report a task outcome; its lease will lapse task_id=%s", task["task_id"])


class HubRefused(Exception):
    """The hub refused a request a handler made (an artifact or a question it does not take)."""


def one_line(text: str, limit: int) -> str:
    """A failure reason or progress note as the hub takes it: one line, no control or bidirectional-override
    characters (a handler's message of several lines, such as a command's stderr, would be refused with 400)."""
    text = re.sub(r"[\u0000-\u001f\u007f-\u009f]+", " ", text)
    text = re.sub(r"[\u202a-\u202e\u2066-\u2069]", "", text)
    return re.sub(r" {2,}", " ", text).strip()[:limit].strip()
