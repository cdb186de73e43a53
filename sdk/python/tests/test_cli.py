"""The Python SDK's zhongshu-node CLI (zhongshu_node/cli.py), as a person runs it: against the real embedded stack
(driven by test/sdk/python/python-sdk.test.ts) --help for each command and usage errors (exit 2), join (the
credentials file 0600), write (acknowledged with its seq), status, verify (OK, again after more writes, then FAIL
through a proxy that tampers with the proof), `run --exec` and `run --call` working tasks an A2A client submitted,
and no node key in anything it printed, even with --verbose. The task handlers' stops (a cancel kills the command's
process group, a timeout, a canceled HTTP call) are checked without the hub."""

import http.server
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from zhongshu_node.task_handlers import http_task_handler, shell_task_handler
from zhongshu_node.worker import TaskContext

E = os.environ
needs_hub = pytest.mark.skipif("ZHONGSHU_TEST_HUB" not in E, reason="needs the stack (test/sdk/python)")
PRINTED = []


def cli(*args, timeout=60):
    res = subprocess.run(
        [sys.executable, "-m", "zhongshu_node", *args], capture_output=True, text=True, timeout=timeout
    )
    PRINTED.extend([res.stdout, res.stderr])
    return res


def hub_args(state, hub=None):
    return ["--hub", hub or E["ZHONGSHU_TEST_MAIN"], "--state", state, "--did", E["ZHONGSHU_TEST_DID"]]


def state_dir(name):
    return os.path.join(E["ZHONGSHU_TEST_SCRATCH"], name)


def join(name, capability):
    state = state_dir(name)
    res = cli("join", *hub_args(state), "--name", f"py-{name}", "--capability", capability)
    assert res.returncode == 0, res.stderr
    node_id, joined_state = res.stdout.split()
    assert joined_state == "pending_review"
    assert os.stat(os.path.join(state, "credentials.json")).st_mode & 0o777 == 0o600
    return state, node_id


@needs_hub
def test_cli_help_and_usage_errors():
    # The console script pip installed (pip --target puts it in <target>/bin), as a user would run it.
    script = os.path.join(E["PYTHONPATH"].split(os.pathsep)[0], "bin", "zhongshu-node")
    top = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=60)
    assert top.returncode == 0, top.stderr
    for command in ("join", "run", "write", "status", "verify"):
        assert f"  {command} " in top.stdout
        res = cli(command, "--help")
        assert res.returncode == 0
        assert res.stdout.startswith(f"usage: zhongshu-node {command}")
    hub = ["--hub", E["ZHONGSHU_TEST_MAIN"], "--state", state_dir("cli-usage")]
    for args in (
        ["fly"],
        ["write", "pycli.x", "not json", *hub, "--did", E["ZHONGSHU_TEST_DID"]],
        ["run", *hub, "--exec", "true", "--call", "http://127.0.0.1:1/"],
        ["run", *hub, "--poll", "1"],
        ["run", *hub, "--call", "ftp://127.0.0.1/"],
        ["run", *hub, "--exec", "true", "--max-tasks", "0"],
        ["run", *hub, "--exec", "true", "--task-timeout", "-1"],
        ["join", *hub],
        ["verify", *hub],
        ["status"],
    ):
        res = cli(*args)
        assert res.returncode == 2, (args, res.stdout, res.stderr)
        assert "zhongshu-node --help for the usage" in res.stderr
    # What the SDK refuses is an error (exit 1), as in the TypeScript CLI: a value that is not an object.
    res = cli("write", "pycli.x", "[1]", *hub, "--did", E["ZHONGSHU_TEST_DID"])
    assert (res.returncode, res.stderr.strip()) == (1, "error: a truth value is a JSON object")


@needs_hub
def test_cli_join_write_status_verify():
    from test_hub import approve, control

    state, node_id = join("cli-node", "pycli.none")
    approve(node_id)
    res = cli("write", "pycli.one", '{"n": 1}', *hub_args(state))
    assert res.returncode == 0, res.stderr
    assert re.fullmatch(r"\S+ acknowledged seq \d+\n", res.stdout)
    status = cli("status", *hub_args(state))
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    assert re.match(r"^hub \S+ \S+: \d+ entries, root [0-9a-f]{64}$", lines[0])
    assert re.match(rf"^node {re.escape(node_id)} \w+$", lines[1])
    assert lines[2] == "outbox pending 0 held 0 acknowledged 1 unverified 1 failed 0"
    key = ["--verifier-key", E["ZHONGSHU_TEST_VERIFIER_KEY"]]
    ok = cli("verify", *hub_args(state), *key)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert re.match(r"^OK \S+: \d+ entries, root [0-9a-f]{64}\nproven 1 of 1 acknowledged writes\n$", ok.stdout)
    # More writes: the next checkpoint must be consistent with the one this state dir saw.
    assert cli("write", "pycli.two", '{"n": 2}', *hub_args(state)).returncode == 0
    again = cli("verify", *hub_args(state), *key, "--verbose")
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.endswith("proven 1 of 1 acknowledged writes\n")
    # Through a proxy that tampers with the inclusion proofs.
    assert cli("write", "pycli.three", '{"n": 3}', *hub_args(state)).returncode == 0
    control("POST", "/proxy", {"tamper_proof": True})
    try:
        bad = cli("verify", *hub_args(state, E["ZHONGSHU_TEST_PROXY"]), *key)
    finally:
        control("POST", "/proxy", {})
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert bad.stdout.startswith("FAIL: inclusion: ")
    assert cli("verify", *hub_args(state), *key).returncode == 0


class _Endpoint(http.server.BaseHTTPRequestHandler):
    """The local endpoint `run --call` posts tasks to: *.ok answers its task's id back, anything else a 500."""

    def do_POST(self):  # noqa: N802 (http.server's name)
        task = json.loads(self.rfile.read(int(self.headers["content-length"])))
        ok = self.headers["x-zhongshu-task-type"].endswith(".ok")
        body = json.dumps({"called": task["task_id"]} if ok else {"error": "the endpoint says no"}).encode()
        self.send_response(200 if ok else 500)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _run_until_settled(state, way, ids):
    """`run` with `way` (--exec … or --call …) until each task in `ids` is done or failed; its output lines."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "zhongshu_node", "run", *hub_args(state), *way, "--poll", "0.3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = []
    errors = []
    settled = set()
    deadline = time.monotonic() + 120

    def read(stream, into):
        for line in stream:
            into.append(line.rstrip("\n"))

    # Both pipes are drained while the CLI runs: a full stderr pipe would stop it mid-task.
    pipes = ((proc.stdout, lines), (proc.stderr, errors))
    readers = [threading.Thread(target=read, args=pipe, daemon=True) for pipe in pipes]
    for reader in readers:
        reader.start()
    try:
        while settled != set(ids) and time.monotonic() < deadline:
            for line in list(lines):
                m = re.match(r"^task (\S+) \S+ (done|failed)", line)
                if m:
                    settled.add(m.group(1))
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = f"still running 60 s after SIGINT (killed; {proc.wait()})"
        for reader in readers:
            reader.join(5)
        PRINTED.extend(lines + errors)
    assert settled == set(ids), {"stdout": lines, "stderr": errors[-40:]}
    assert code == 0, {"exit": code, "stderr": errors[-40:]}
    return lines


@needs_hub
def test_cli_run_works_tasks_with_exec_and_call():
    from test_hub import a2a_send, a2a_states, approve

    state, node_id = join("cli-worker", "pycli.work")
    approve(node_id)
    command = 'cat > /dev/null; case "$ZHONGSHU_TASK_TYPE" in *.ok) echo "{\\"ran\\": \\"$ZHONGSHU_TASK_ID\\"}";; *) echo "first line" >&2; echo "no good" >&2; exit 3;; esac'
    ok, bad = a2a_send([("pycli.exec.ok", ("pycli.work",)), ("pycli.exec.bad", ("pycli.work",))])
    lines = _run_until_settled(state, ["--exec", command], [ok, bad])
    assert f"running as {node_id}; working tasks with a shell command (--exec); Ctrl-C stops" in lines
    assert any(re.fullmatch(rf"task {ok} pycli.exec.ok done in \d+\.\d s", li) for li in lines), lines
    assert f"task {bad} pycli.exec.bad failed after" in "\n".join(lines)
    assert a2a_states([ok, bad]) == [
        ("TASK_STATE_COMPLETED", [{"ran": ok}]),
        ("TASK_STATE_FAILED", []),
    ]

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Endpoint)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/task?token=secret"
        ok, bad = a2a_send([("pycli.call.ok", ("pycli.work",)), ("pycli.call.bad", ("pycli.work",))])
        lines = _run_until_settled(state, ["--call", url], [ok, bad])
    finally:
        server.shutdown()
    # The label names the endpoint without its query (which may hold a secret).
    port = server.server_address[1]
    assert f"running as {node_id}; working tasks with POST http://127.0.0.1:{port}/task (--call); Ctrl-C stops" in lines
    assert a2a_states([ok, bad]) == [
        ("TASK_STATE_COMPLETED", [{"called": ok}]),
        ("TASK_STATE_FAILED", []),
    ]


@needs_hub
def test_cli_prints_no_node_key():
    keys = []
    for name in ("cli-node", "cli-worker"):
        with open(os.path.join(state_dir(name), "credentials.json"), encoding="utf-8") as f:
            keys.append(json.load(f)["api_key"])
    printed = "\n".join(PRINTED)
    assert "pycli" in printed or "acknowledged" in printed  # the earlier tests ran and printed
    for key in keys:
        assert key not in printed


# -- the task handlers' stops, without the hub ------------------------------------------------------------------


def _gone(pid):
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().split(") ", 1)[1][0] == "Z"  # a zombie waits for its reaper: gone all the same
    except FileNotFoundError:
        return True


def _task(kind="t"):
    return {"task_id": "task-1", "type": kind, "payload": {}, "attempts": 1}


def test_shell_handler_cancel_kills_the_command_and_what_it_started(tmp_path):
    pids = tmp_path / "pids"
    cancelled = threading.Event()
    handler = shell_task_handler(f"echo $$ > {pids}; sleep 30 & echo $! >> {pids}; wait", kill_grace_s=1)

    def cancel_once_started():
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (pids.exists() and len(pids.read_text().split()) == 2):
            time.sleep(0.05)
        cancelled.set()

    threading.Thread(target=cancel_once_started, daemon=True).start()
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="the command was stopped"):
        handler(_task(), TaskContext(cancelled, lambda note=None: None))
    assert time.monotonic() - started < 5
    written = [int(p) for p in pids.read_text().split()]
    assert len(written) == 2
    for pid in written:
        assert _gone(pid), pid


def test_shell_handler_times_out_and_reports_stderr_and_bad_output():
    never = TaskContext(threading.Event(), lambda note=None: None)
    with pytest.raises(RuntimeError, match=r"timed out after 0\.5 s"):
        shell_task_handler("sleep 30", timeout_s=0.5, kill_grace_s=1)(_task(), never)
    with pytest.raises(RuntimeError, match=r"exited with status 4: one \| two"):
        shell_task_handler("echo one >&2; echo two >&2; exit 4")(_task(), never)
    with pytest.raises(RuntimeError, match="stdout is JSON but not an object"):
        shell_task_handler("echo '[1]'")(_task(), never)
    assert shell_task_handler("cat > /dev/null")(_task(), never) == {}
    out = shell_task_handler('cat; echo "" ; true')(_task(), never)  # the task's JSON echoed back is its result
    assert out["task_id"] == "task-1"


def test_http_handler_stops_a_call_on_cancel_and_on_timeout():
    from test_hub import eventually

    closed = []

    class Slow(http.server.BaseHTTPRequestHandler):
        """Reads the task, then waits up to 10 s without answering, noting when the caller's connection closes."""

        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers["content-length"]))
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                readable, _, _ = select.select([self.connection], [], [], 0.05)
                if readable and not self.connection.recv(1, socket.MSG_PEEK):
                    closed.append(time.monotonic())
                    return

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/task"
    try:
        cancelled = threading.Event()
        threading.Timer(0.3, cancelled.set).start()
        started = time.monotonic()
        with pytest.raises(RuntimeError, match="was stopped"):
            http_task_handler(url)(_task(), TaskContext(cancelled, lambda note=None: None))
        stopped = time.monotonic()
        assert stopped - started < 3
        # The endpoint saw its connection close (the TypeScript handler's abort does the same).
        eventually(lambda: len(closed) == 1, 5, "the endpoint seeing the canceled call's connection close")
        with pytest.raises(RuntimeError, match=r"did not answer within 0\.5 s"):
            http_task_handler(url, timeout_s=0.5)(_task(), TaskContext(threading.Event(), lambda note=None: None))
        assert time.monotonic() - stopped < 3
        eventually(lambda: len(closed) == 2, 5, "the endpoint seeing the timed-out call's connection close")
    finally:
        server.shutdown()

