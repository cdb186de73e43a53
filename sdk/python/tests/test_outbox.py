"""The outbox without a hub: writes survive a reopen and a SIGKILL of the process making them, one process holds
a state dir at a time, settled writes leave at the next open, bad keys and values fail the call itself, and the
credentials file is 0600 and refused when others can read it."""

import os
import signal
import subprocess
import sys
import time

import pytest

from zhongshu_node import CredentialsError, HubNode, Outbox, OutboxLockedError, load_credentials, save_credentials
from zhongshu_node.intake import Intake

CHILD = r"""
import sys
from zhongshu_node import HubNode
node = HubNode("http://127.0.0.1:9", sys.argv[1], did="did:example:crash", heartbeat=False, verify=False)
node.start()
i = 0
while True:
    h = node.write(f"sdk.kill.{i}", {"i": i})
    print(h.id, i, flush=True)
    i += 1
"""


def test_a_returned_write_survives_sigkill(tmp_path):
    state = tmp_path / "killed"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(state)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    returned = []
    deadline = time.monotonic() + 30
    while len(returned) < 300 and time.monotonic() < deadline:
        line = child.stdout.readline()
        if line.strip():
            returned.append(line.split()[0])
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert len(returned) >= 300
    # The kernel released the dead process's lock: a new outbox opens it and holds every returned write.
    box = Outbox(str(state / "outbox.sqlite"))
    try:
        pending = {r.id for r in box.list() if r.state == "pending"}
        assert set(returned) <= pending
    finally:
        box.close()


def test_writes_survive_a_reopen_and_settled_ones_leave(tmp_path):
    path = str(tmp_path / "outbox.sqlite")
    box = Outbox(path)
    ids = [box.enqueue(f"sdk.reopen.{i}", {"i": i}).id for i in range(5)]
    box.acknowledge(ids[0], 10, "ev_10")
    box.mark_verified(ids[0], 12)
    box.acknowledge(ids[1], 11, "ev_11")
    box.fail(ids[2], 400, "bad_request", "no")
    box.hold(ids[3], "apr_1", 9)
    with pytest.raises(OutboxLockedError, match=f"in use by process {os.getpid()}"):
        Outbox(path)
    box.close()
    again = Outbox(path)
    try:
        by_id = {r.id: r for r in again.list()}
        assert sorted(by_id) == sorted(ids[1:2] + ids[3:])  # proven and failed writes left
        assert (by_id[ids[1]].state, by_id[ids[1]].seq) == ("acknowledged", 11)
        assert (by_id[ids[3]].state, by_id[ids[3]].approval_id, by_id[ids[3]].held_after) == ("held", "apr_1", 9)
        assert by_id[ids[4]].value == {"i": 4}
        assert again.counts()["unverified"] == 1
    finally:
        again.close()
    assert os.stat(path).st_mode & 0o777 == 0o600


def test_bad_writes_fail_the_call(tmp_path):
    node = HubNode("http://127.0.0.1:9", str(tmp_path / "n"), did="did:example:x", heartbeat=False, verify=False)
    try:
        for key in ("no-namespace", "hub.mine", "truth-x.y", "a." + "b" * 300):
            with pytest.raises(ValueError):
                node.write(key, {})
        with pytest.raises(ValueError):
            node.write("sdk.x", [])
        with pytest.raises(ValueError):
            node.write("sdk.x", {"n": float("nan")})
        assert node.writes() == []
    finally:
        node.stop()


def test_credentials_are_private(tmp_path):
    path = str(tmp_path / "credentials.json")
    save_credentials(path, {"hub_url": "http://h", "node_id": "n1", "api_key": "k"})
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert load_credentials(path)["node_id"] == "n1"
    os.chmod(path, 0o644)
    with pytest.raises(CredentialsError, match="can be read by others"):
        load_credentials(path)


@pytest.mark.parametrize("sync", ["group", "each", "none"])
def test_every_sync_mode_keeps_what_returned_and_flush_waits_for_the_disk(tmp_path, sync, capsys):
    path = str(tmp_path / sync / "outbox.sqlite")
    box = Outbox(path, sync=sync)
    ms = []
    for i in range(1000):
        t0 = time.perf_counter()
        box.enqueue(f"sdk.sync.{i}", {"i": i})
        ms.append((time.perf_counter() - t0) * 1000)
    assert box.flush(timeout_s=30)
    box.close()
    ordered = sorted(ms)
    with capsys.disabled():
        print(
            f"\nfigure: enqueue, sync {sync!r}: median {ordered[500]:.3f} ms, p99 {ordered[990]:.3f} ms,"
            f" max {ordered[-1]:.3f} ms, {sum(1 for t in ms if t > 1)} of 1000 over 1 ms"
        )
    again = Outbox(path)
    assert [r.key for r in again.list()] == [f"sdk.sync.{i}" for i in range(1000)]
    again.close()


def test_the_intake_ends_at_a_torn_record_and_starts_over_once_drained(tmp_path):
    path = str(tmp_path / "intake")
    intake = Intake(path, size=64)
    assert intake.append(b"a" * 10) and intake.append(b"b" * 10)
    assert not intake.append(b"c" * 40)  # does not fit: the outbox then stores it on the caller's thread
    intake._mm[32:42] = b"x" * 10  # a third record's body, copied before a crash; its length never was
    intake.close()
    again = Intake(path, size=64)
    bodies, mark = again.take()
    assert [bytes(b) for b in bodies] == [b"a" * 10, b"b" * 10]
    again.taken(mark)
    assert not again.pending()
    for body in (b"d" * 10, b"e" * 10, b"f" * 10):
        assert again.append(body)
    again.close()
    third = Intake(path, size=64)
    assert [bytes(b) for b in third.take()[0]] == [b"d" * 10, b"e" * 10, b"f" * 10]
    third.close()


def test_a_full_intake_still_stores_the_write(tmp_path):
    box = Outbox(str(tmp_path / "outbox.sqlite"))
    big = {"text": "x" * 600_000}
    ids = [box.enqueue(f"sdk.big.{i}", big).id for i in range(10)]  # 6 MB: more than the intake holds
    box.close()
    again = Outbox(str(tmp_path / "outbox.sqlite"))
    assert [r.id for r in again.list()] == ids
    again.close()


def test_a_close_while_the_syncer_runs_loses_nothing(tmp_path):
    for round_ in range(10):
        path = str(tmp_path / f"r{round_}" / "outbox.sqlite")
        box = Outbox(path)
        for i in range(100):
            box.enqueue(f"sdk.close.{i}", {"i": i})
        box.close()  # the syncer is usually in a round here
        again = Outbox(path)
        assert again.counts()["pending"] == 100
        again.close()
    with pytest.raises(ValueError):
        Outbox(str(tmp_path / "bad" / "outbox.sqlite"), sync="sometimes")
