"""zhongshu-node, from the Python SDK: the same commands, options and output lines as the TypeScript SDK's CLI
(sdk/typescript/src/cli.ts). ``join`` registers (or loads) the node, ``run`` beats and sends the outbox until Ctrl-C
(and with --exec or --call works tasks through a shell command or a local HTTP endpoint), ``write`` records one truth
and waits for its acknowledgement, ``status`` shows the hub and the node, ``verify`` checks the checkpoint, its
consistency with the last one seen and the outbox's acknowledged writes. Messages go to stderr, results (one line
each) to stdout; exit 1 on an error, 2 on a usage error. ``python -m zhongshu_node`` runs it too."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Dict, List, Optional
from urllib.parse import quote, urlparse

from .checkpoint import VerificationError
from .credentials import load_credentials
from .node import HubNode
from .task_handlers import http_task_handler, shell_task_handler

COMMON = """
  --hub <url>            the hub's main listener (or ZHONGSHU_HUB_URL)
  --state <dir>          the node's state dir: credentials (0600), outbox, last checkpoint (default ./.zhongshu-node)
  --did <did>            the DID truth writes are made with (or ZHONGSHU_DID)
  --verifier-key <key>   the checkpoint verifier key to pin (or ZHONGSHU_VERIFIER_KEY)
  --verbose              log what the SDK does (never the node key)
  --help                 this help"""

HELP: Dict[str, str] = {
    "": """usage: zhongshu-node <command> [options]

commands:
  join      register the node (or load its saved credentials) and send one heartbeat
  run       heartbeat, send the outbox and verify until Ctrl-C; work tasks with --exec or --call
  write     record a truth: zhongshu-node write <key> '<json object>' [--type <truth type>]
  status    the hub's ledger and the node's state and outbox
  verify    check the checkpoint, its consistency with the last one seen, and the outbox's writes

zhongshu-node <command> --help for its options.""",
    "join": "usage: zhongshu-node join --hub <url> --name <name> [--brand <code>] [--capability <name>]...\n" + COMMON,
    "run": """usage: zhongshu-node run --hub <url> [--did <did>] [--exec '<command>' | --call <url>] [--max-tasks <n>]
                         [--task-timeout <s>] [--poll <s>]
  Heartbeats, sends the outbox and verifies until Ctrl-C; with --exec or --call it also works tasks: while the node
  is online it claims queued tasks whose required capabilities it declared at join, at most --max-tasks (1) at once.
  --exec '<command>'     run the command with /bin/sh -c per task, in a process group of its own: the task's JSON
                         ({"task_id","type","payload","attempts",…}) on stdin, and ZHONGSHU_TASK_ID,
                         ZHONGSHU_TASK_TYPE, ZHONGSHU_TASK_ATTEMPT in its environment. Exit 0: the task is done,
                         its result the JSON object printed on stdout (nothing: {}). Another status: the task
                         fails, the last lines of stderr its reason. A cancel by the submitter, a lost claim,
                         Ctrl-C or the timeout sends SIGTERM to the group (SIGKILL 5 s later).
  --call <url>           POST the task's JSON to a local HTTP endpoint per task (headers X-Zhongshu-Task-Id,
                         X-Zhongshu-Task-Type). A 2xx answer with a JSON object (or nothing) completes the task;
                         any other answer fails it with the status and the start of the body. A cancel, a lost
                         claim, Ctrl-C or the timeout closes the connection.
  --task-timeout <s>     give up on a task after this long and fail it (default 600)
  --poll <s>             between claims while nothing is queued (default 5)
  Prints one line per event on stdout: state changes, writes, verified entries, and per task
  "task <id> <type> claimed", "… done in 1.2 s", "… failed: <reason>", "… canceled", "… lost" (claim lapsed).
"""
    + COMMON,
    "write": """usage: zhongshu-node write <key> '<json object>' --hub <url> --did <did> [--type <truth type>] [--timeout <s>]
  Waits up to --timeout seconds (30) for the hub's answer; a write not yet acknowledged stays in the outbox, and
  the next write, run or verify sends it.
"""
    + COMMON,
    "status": "usage: zhongshu-node status --hub <url>\n" + COMMON,
    "verify": """usage: zhongshu-node verify --hub <url> [--did <did>] [--verifier-key <key>] [--witness <key>]... [--quorum <k>]
  --witness: a witness's cosignature key (repeat for each); --quorum: how many must cosign (default: all).
  Exits 1 with a FAIL line when a checkpoint signature, a cosignature, a consistency proof or an inclusion proof
  does not verify, or when fewer witnesses than the quorum cosigned the checkpoint.
"""
    + COMMON,
}


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors as usage errors (exit 2 with our message) and no help of its own."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="zhongshu-node", add_help=False, allow_abbrev=False)
    p.add_argument("positionals", nargs="*")
    for name in ("hub", "state", "did", "verifier-key", "quorum", "name", "brand", "type", "timeout"):
        p.add_argument(f"--{name}")
    for name in ("exec", "call", "max-tasks", "task-timeout", "poll"):
        p.add_argument(f"--{name}")
    p.add_argument("--witness", action="append")
    p.add_argument("--capability", action="append")
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--help", action="store_true")
    return p


def _out(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _err(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


class _Lines(logging.Formatter):
    """As the TypeScript CLI prints them: the message, after `warning: ` or `error: ` for those levels."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        return f"{record.levelname.lower()}: {line}" if record.levelno >= logging.WARNING else line


def _logger(verbose: bool, quiet: bool = True) -> logging.Logger:
    """The SDK's messages on stderr: errors always; with `quiet=False` (run) warnings and information too; everything
    with --verbose. The SDK never logs the node key (docs/node-sdk.md), so --verbose prints none either."""
    log = logging.getLogger("zhongshu_node.cli")
    log.propagate = False
    log.handlers[:] = []
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Lines("%(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.DEBUG if verbose else (logging.ERROR if quiet else logging.INFO))
    return log


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return _run(argv)
    except UsageError as err:
        _err(f"{err}\nzhongshu-node --help for the usage")
        return 2
    except VerificationError as err:
        _out(f"FAIL: {err.kind}: {err}")
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as err:
        _err(f"error: {err}")
        return 1


def _run(argv: List[str]) -> int:
    command = argv[0] if argv and not argv[0].startswith("-") else ""
    values = _parser().parse_intermixed_args(argv[1:] if command else argv)
    positionals: List[str] = values.positionals
    if values.help or not command:
        _out(HELP.get(command, HELP[""]))
        return 0 if command or values.help else 2
    if command not in HELP:
        raise UsageError(f"unknown command {command}")
    hub_url = values.hub or os.environ.get("ZHONGSHU_HUB_URL")
    if not hub_url:
        raise UsageError("--hub is required")
    state_dir = os.path.abspath(values.state or ".zhongshu-node")
    did = values.did or os.environ.get("ZHONGSHU_DID")
    quorum = None
    if values.quorum is not None:
        if not values.quorum.isdigit():
            raise UsageError("--quorum is a whole number")
        quorum = int(values.quorum)
    base: Dict[str, Any] = dict(
        hub_url=hub_url,
        state_dir=state_dir,
        did=did,
        verifier_key=getattr(values, "verifier_key") or os.environ.get("ZHONGSHU_VERIFIER_KEY"),
        witnesses=values.witness,
        witness_quorum=quorum,
        keep_unverified=True,  # `verify` proves what `write` and `run` left
        logger=_logger(values.verbose),
    )
    credentials_path = os.path.join(state_dir, "credentials.json")

    if command == "join":
        if not values.name and not load_credentials(credentials_path):
            raise UsageError("--name is required for a first join")
        register = (
            {
                "name": values.name,
                "brand": {"code": values.brand or "custom"},
                "capabilities": {"declared": values.capability or []},
            }
            if values.name
            else None
        )
        node = HubNode(**base, verify=False, heartbeat_interval_s=3600, register=register)
        beat = threading.Event()
        seen: Dict[str, str] = {}
        node.on("heartbeat", lambda a: (seen.setdefault("state", a.get("state", "")), beat.set()))
        try:
            node.start()
            beat.wait(10)
        finally:
            node.stop()
        _out(f"{node.node_id} {seen.get('state') or node.state}")
        _err(f"credentials in {credentials_path} (mode 0600)")
        return 0

    if command == "run":
        worker = _task_worker(values)
        node = HubNode(
            **{**base, "logger": _logger(values.verbose, quiet=False)},
            **(worker["options"] if worker else {}),
        )
        claimed_at: Dict[str, float] = {}

        def on_state(s: str, p: str) -> None:
            _out(f"state {p} -> {s}")
            if worker and s == "pending_review":
                _err("the node is pending review: it claims tasks once a reviewer approves it")

        def on_task(e: Dict[str, Any]) -> None:
            tid, kind, state = e["task_id"], e.get("type"), e["state"]
            if state == "claimed":
                claimed_at[tid] = time.monotonic()
                _out(f"task {tid} {kind} claimed")
                return
            took = f"{time.monotonic() - claimed_at.pop(tid, time.monotonic()):.1f} s"
            how = {
                "done": f"done in {took}",
                "failed": f"failed after {took}: {e.get('reason', '')}",
                "canceled": "canceled by its submitter: stopped",
                "lost": "lost: its lease lapsed and the hub gave it to another node; stopped",
                "input_required": f"waiting for its submitter's answer after {took}",
            }[state]
            _out(f"task {tid} {kind} {how}")

        node.on("state", on_state)
        node.on("write", lambda r: _out(f"write {r.id} {r.state}{f' seq {r.seq}' if r.seq else ''}"))
        node.on("verified", lambda r, cp: _out(f"verified seq {r.seq} in tree {cp.size}"))
        node.on("error", lambda e: _err(f"error: {e}"))
        node.on("task", on_task)
        stop = threading.Event()

        def on_signal(*_: Any) -> None:
            stop.set()
            # A second Ctrl-C while the node stops ends the process at once.
            for again in (signal.SIGINT, signal.SIGTERM):
                signal.signal(again, signal.SIG_DFL)

        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, on_signal)
        node.start()
        working = f"; working tasks with {worker['label']}" if worker else ""
        _out(f"running as {node.node_id}{working}; Ctrl-C stops")
        while not stop.wait(0.5):
            pass
        if claimed_at:
            _err(
                f"stopping: {len(claimed_at)} task(s) in progress are stopped and not reported"
                " (the hub queues them again)"
            )
        node.stop()
        return 0

    if command == "write":
        if len(positionals) < 2:
            raise UsageError("write needs <key> and '<json object>'")
        key, raw = positionals[0], positionals[1]
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            raise UsageError("the value is not JSON") from None
        try:
            timeout_s = float(values.timeout) if values.timeout is not None else 30.0
        except ValueError:
            raise UsageError("--timeout is a number of seconds") from None
        node = HubNode(**base, heartbeat=False, verify=False)
        try:
            # A value that is not an object, a bad key or no DID: refused by the SDK (exit 1, as the TypeScript CLI).
            handle = node.write(key, value, values.type)
            node.start()
            try:
                outcome = handle.result(timeout=timeout_s)
            except FutureTimeout:
                _err(f"not acknowledged within {timeout_s:g} s: {handle.id} stays in the outbox")
                _out(f"{handle.id} {handle.state() or 'pending'}")
                return 1
        finally:
            node.stop()
        if outcome.state == "acknowledged":
            _out(f"{outcome.id} acknowledged seq {outcome.seq}")
        else:
            _out(f"{outcome.id} {outcome.state}")
        return 0

    if command == "status":
        node = HubNode(**{**base, "did": None}, heartbeat=False, verify=False)
        try:
            status = node.status()
            _out(
                f"hub {status.get('service')} {status.get('hub_version')}: {status.get('truth_count')} entries, root"
                f" {status.get('merkle_root')}"
            )
            saved = load_credentials(credentials_path)
            if saved:
                res = node.http.request("GET", f"/a2a/nodes/{quote(saved['node_id'], safe='')}")
                body = res.body if isinstance(res.body, dict) else {}
                state = (body.get("node") or {}).get("state") or body.get("state") or f"unknown ({res.status})"
                _out(f"node {saved['node_id']} {state}")
            c = node.outbox.counts()
            _out(
                f"outbox pending {c['pending']} held {c['held']} acknowledged {c['acknowledged']} unverified"
                f" {c['unverified']} failed {c['failed']}"
            )
        finally:
            node.stop()
        return 0

    if command == "verify":
        if not did:
            raise UsageError("verify needs the --did the writes were made with")
        node = HubNode(**base, heartbeat=False, verify=True)
        unverified = node.outbox.counts()["unverified"]
        failures: List[VerificationError] = []

        def on_error(e: Exception) -> None:
            if isinstance(e, VerificationError):
                failures.append(e)
            else:
                _err(f"error: {e}")

        node.on("error", on_error)
        try:
            checkpoint, proven = node.verify_now()
            for f in failures:
                _out(f"FAIL: {f.kind}: {f}")
            if failures:
                return 1
            _out(f"OK {checkpoint.origin}: {checkpoint.size} entries, root {checkpoint.root.hex()}")
            _out(f"proven {proven} of {unverified} acknowledged writes")
            return 0
        finally:
            node.stop()
    return 2


def _task_worker(values: argparse.Namespace) -> Optional[Dict[str, Any]]:
    """The worker ``run`` gets from --exec or --call (none without either), checked as a usage error before anything
    runs. Its label names the way, not the command or the URL's query, which may hold a secret."""
    exec_, call = values.exec, values.call
    if exec_ is not None and call is not None:
        raise UsageError("give --exec or --call, not both")
    if exec_ is None and call is None:
        for option in ("max_tasks", "task_timeout", "poll"):
            if getattr(values, option) is not None:
                raise UsageError(f"--{option.replace('_', '-')} goes with --exec or --call")
        return None

    def seconds(option: str, fallback: float) -> float:
        raw = getattr(values, option)
        try:
            v = fallback if raw is None else float(raw)
        except ValueError:
            v = -1
        if not v > 0 or v == float("inf"):
            raise UsageError(f"--{option.replace('_', '-')} is a number of seconds above 0")
        return v

    raw = values.max_tasks
    if raw is not None and not raw.isdigit():
        raise UsageError("--max-tasks is a whole number from 1 to 50")
    max_tasks = 1 if raw is None else int(raw)
    if not 1 <= max_tasks <= 50:
        raise UsageError("--max-tasks is a whole number from 1 to 50")
    timeout_s = seconds("task_timeout", 600)
    poll_s = seconds("poll", 5)
    options = {"max_tasks": max_tasks, "task_poll_s": poll_s}
    if exec_ is not None:
        if not exec_.strip():
            raise UsageError("--exec needs a command")
        return {
            "options": {**options, "worker": shell_task_handler(exec_, timeout_s=timeout_s)},
            "label": "a shell command (--exec)",
        }
    url = urlparse(call)
    if url.scheme not in ("http", "https") or not url.netloc:
        raise UsageError(f"--call needs an http(s) URL such as http://127.0.0.1:8000/task, not {call}")
    return {
        "options": {**options, "worker": http_task_handler(call, timeout_s=timeout_s)},
        "label": f"POST {url.scheme}://{url.netloc}{url.path} (--call)",
    }


if __name__ == "__main__":
    sys.exit(main())
