"""The Python SDK against the real embedded stack, driven by test/sdk/python/python-sdk.test.ts (which passes the
hub's URLs in ZHONGSHU_TEST_*; skipped without them). A node registers, keeps its credentials 0600, is approved
and beats; 1,000 writes made while the API process it talks to is killed and started again twice land exactly
once and no write() call started a request; held writes follow their decision; a worker claims, renews, completes,
fails and honours a cancel of tasks an A2A client submitted; tampered proofs and checkpoints served by a proxy are
reported; a checkpoint proves nothing until the pinned witnesses cosigned it, and a forged cosignature is reported;
429 and 503 are waited out as Retry-After asks; no node key is logged."""

import asyncio
import logging
import os
import statistics
import threading
import time
import uuid

import httpx
import pytest

from zhongshu_node import (
    CredentialsError,
    HubError,
    HubNode,
    OutboxLockedError,
    TaskCompletion,
    VerificationError,
)

E = os.environ
pytestmark = pytest.mark.skipif("ZHONGSHU_TEST_HUB" not in E, reason="needs the stack (test/sdk/python)")

if "ZHONGSHU_TEST_LOG" in E:
    _handler = logging.FileHandler(E["ZHONGSHU_TEST_LOG"], encoding="utf-8")
    _handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    for _name in ("zhongshu_node", "httpx"):
        logging.getLogger(_name).addHandler(_handler)
        logging.getLogger(_name).setLevel(logging.DEBUG)

NODES = []


@pytest.fixture(scope="module", autouse=True)
def stop_every_node():
    yield
    for node in NODES:
        try:
            node.stop()
        except Exception:
            pass


def control(method, path, body=None, **params):
    res = httpx.request(method, E["ZHONGSHU_TEST_CONTROL"] + path, json=body, params=params, timeout=120)
    res.raise_for_status()
    return res.json()


def ledger_keys(prefix):
    return control("GET", "/ledger", prefix=prefix)["keys"]


def eventually(check, timeout_s=15, what="condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def reviewer(method, url, body):
    return httpx.request(method, url, json=body, headers={"x-zr-token": E["ZHONGSHU_TEST_REVIEWER"]}, timeout=30)


def approve(node_id):
    res = reviewer("POST", E["ZHONGSHU_TEST_MAIN"] + "/a2a/review/approve", {"node_id": node_id, "reason": "py sdk"})
    assert res.status_code == 200, res.text


def new_node(name, **options):
    settings = dict(
        hub_url=E["ZHONGSHU_TEST_HUB"],
        state_dir=os.path.join(E["ZHONGSHU_TEST_SCRATCH"], name),
        did=E["ZHONGSHU_TEST_DID"],
        verifier_key=E["ZHONGSHU_TEST_VERIFIER_KEY"],
        register={"name": f"py-{name}", "brand": {"code": "custom"}, "capabilities": {"declared": ["summarize"]}},
        heartbeat_interval_s=0.5,
        verify_interval_s=0.3,
        held_poll_s=0.3,
        max_backoff_s=2,
        request_timeout_s=5,
    )
    settings.update(options)
    node = HubNode(**settings)
    NODES.append(node)
    return node


def test_join_beat_adopt_and_refusals():
    node = new_node("joiner")
    states = []
    node.on("state", lambda state, previous: states.append(state))
    node.start()
    assert node.state == "pending_review"
    creds = os.path.join(E["ZHONGSHU_TEST_SCRATCH"], "joiner", "credentials.json")
    assert os.stat(creds).st_mode & 0o777 == 0o600
    approve(node.node_id)
    eventually(lambda: node.state == "online", 15, "the node online")
    assert states == ["pending_review", "online"]
    node.stop()
    # A second client on the same state dir adopts the saved credentials instead of registering again.
    again = new_node("joiner")
    again.start()
    assert again.node_id == node.node_id
    eventually(lambda: again.state == "online", 15, "the adopted node online")
    again.stop()
    # A credentials file others can read is refused; so is a second client of a state dir in use.
    os.chmod(creds, 0o644)
    refused = new_node("joiner")
    with pytest.raises(CredentialsError, match="can be read by others"):
        refused.start()
    refused.stop()
    os.chmod(creds, 0o600)
    first = new_node("joiner", heartbeat=False)
    with pytest.raises(OutboxLockedError, match="is in use by process"):
        new_node("joiner", heartbeat=False)
    first.stop()
    # Credentials issued earlier (e.g. by the join page) are adopted and saved 0600.
    adopted = new_node("adopter", register=None, credentials={"node_id": node.node_id, "api_key": _key_of("joiner")})
    adopted.start()
    eventually(lambda: adopted.state == "online", 15, "the node of adopted credentials online")
    adopted.stop()


def _key_of(name):
    import json

    with open(os.path.join(E["ZHONGSHU_TEST_SCRATCH"], name, "credentials.json"), encoding="utf-8") as f:
        return json.load(f)["api_key"]


class ThreadRecordingTransport(httpx.HTTPTransport):
    """Records the thread of every request: write() must leave them all to the SDK's own threads."""

    def __init__(self):
        super().__init__()
        self.threads = []

    def handle_request(self, request):
        self.threads.append(threading.get_ident())
        return super().handle_request(request)


def test_writes_land_once_through_two_api_kills_and_never_block():
    transport = ThreadRecordingTransport()
    node = new_node("writer", heartbeat=False, concurrency=8, transport=transport)
    node.start()
    # The approved node of the first test beats beside it: it must see itself offline while the API is away.
    beater = new_node("joiner", offline_after_s=2)
    beater_states = []
    beater.on("state", lambda state, previous: beater_states.append(state))
    beater.start()
    eventually(lambda: beater.state == "online", 10, "the beater online")
    handles, call_ms = [], []
    waiting_at_restart = []
    n = 1000
    for i in range(n):
        if i in (200, 600):
            control("POST", "/api2/kill")
            if i == 200:
                time.sleep(2.5)  # long enough for the beater to judge itself offline
        if i in (450, 850):
            waiting_at_restart.append(node.outbox.counts()["pending"])
            control("POST", "/api2/start")
        t0 = time.perf_counter()
        handles.append(node.write(f"pysdk.restart.{i}", {"i": i, "note": "through two kills"}))
        call_ms.append((time.perf_counter() - t0) * 1000)
        if i % 50 == 49:
            time.sleep(0.02)
    # No request ever ran on the caller's thread: write() stored the write and returned, nothing else.
    outcomes = [h.result(timeout=180) for h in handles]
    assert threading.get_ident() not in transport.threads and len(transport.threads) >= n
    assert all(o.state == "acknowledged" for o in outcomes)
    assert len({o.seq for o in outcomes}) == n
    keys = ledger_keys("pysdk.restart.")
    assert len(keys) == n and len(set(keys)) == n  # each write exactly once
    assert node.outbox.counts()["pending"] == 0 and node.outbox.counts()["failed"] == 0
    # The writes made while the API was down were all still waiting for it.
    assert all(w >= 200 for w in waiting_at_restart), waiting_at_restart
    eventually(lambda: beater.state == "online", 15, "the beater back")
    assert beater_states[0] == "online" and "offline" in beater_states and beater_states[-1] == "online"
    beater.stop()
    eventually(lambda: node.outbox.counts()["unverified"] == 0, 90, "every write proven")
    node.stop()
    ordered = sorted(call_ms)
    over = sum(1 for t in call_ms if t > 1)
    print(
        f"figure: {n} write() calls: median {statistics.median(ordered):.3f} ms, p99 {ordered[int(n * 0.99)]:.3f} ms,"
        f" max {ordered[-1]:.3f} ms, {over} over 1 ms (a copy into the intake; SQLite and the fsync off this thread);"
        f" pending at the restarts {waiting_at_restart}"
    )


def test_write_starts_no_request():
    """write() does no network I/O: with the sending thread not started, no request is made at all."""
    node = new_node("no-io", heartbeat=False)
    before = node.http.requests
    handle = node.write("pysdk.noio.one", {"x": 1})
    assert node.http.requests == before and handle.state() == "pending"
    node.start()
    assert handle.result(timeout=20).state == "acknowledged"
    node.stop()


def test_held_writes_follow_their_decision():
    node = new_node("holder", heartbeat=False)
    node.start()
    risky = node.write("pysdk.held.approve", {"plan": "a"}, truth_type="risk")
    refused = node.write("pysdk.held.reject", {"plan": "b"}, truth_type="risk")
    called = []
    refused.add_done_callback(called.append)
    for handle, verb in ((risky, "approve"), (refused, "reject")):
        approval = eventually(lambda h=handle: getattr(node.outbox.get(h.id), "approval_id", None), 15, "held")
        assert handle.state() == "held"
        res = reviewer("POST", f"{E['ZHONGSHU_TEST_MAIN']}/api/truth/approvals/{approval}/{verb}", {"reason": "py"})
        assert res.status_code == 200, res.text
    assert risky.result(timeout=30).state == "acknowledged" and risky.result().seq
    assert refused.result(timeout=30).state == "rejected"
    assert [o.state for o in called] == ["rejected"]
    assert ledger_keys("pysdk.held.") == ["pysdk.held.approve"]
    node.stop()

def a2a_client(run):
    """Runs `run(client)` with an A2A client (a2a-sdk, as shipped, over the card's HTTP+JSON interface) holding the
    reviewer's token: how the work reaches the node, and how its outcome is read back."""
    from a2a.client import ClientConfig, ClientFactory
    from a2a.client.card_resolver import A2ACardResolver

    async def main():
        headers = {"x-zr-token": E["ZHONGSHU_TEST_REVIEWER"]}
        async with httpx.AsyncClient(timeout=30, headers=headers) as http:
            card = await A2ACardResolver(http, E["ZHONGSHU_TEST_MAIN"]).get_agent_card()
            config = ClientConfig(
                httpx_client=http, supported_protocol_bindings=["HTTP+JSON"], streaming=False, polling=True
            )
            return await run(ClientFactory(config).create(card))

    return asyncio.run(main())


def a2a_send(kinds):
    """One A2A message per (task type, capabilities): the data {"n": 7}, the type and capabilities in metadata."""
    from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest
    from google.protobuf import struct_pb2

    async def run(client):
        ids = []
        for kind, capabilities in kinds:
            metadata = struct_pb2.Struct()
            metadata.update({"task_type": kind, "required_capabilities": list(capabilities)})
            data = struct_pb2.Value()
            data.struct_value.update({"n": 7})
            message = Message(
                message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(data=data)], metadata=metadata
            )
            replies = [reply async for reply in client.send_message(SendMessageRequest(message=message))]
            assert len(replies) == 1 and replies[0].HasField("task"), replies
            ids.append(replies[0].task.id)
        return ids

    return a2a_client(run)


def a2a_states(ids):
    """The state of each task (its TaskState name) and its artifacts' data parts, as the A2A client sees them."""
    from a2a.types.a2a_pb2 import GetTaskRequest, TaskState
    from google.protobuf.json_format import MessageToDict

    async def run(client):
        seen = []
        for tid in ids:
            task = await client.get_task(GetTaskRequest(id=tid))
            data = [MessageToDict(p)["data"] for a in task.artifacts for p in a.parts if p.HasField("data")]
            seen.append((TaskState.Name(task.status.state), data))
        return seen

    return a2a_client(run)



def test_worker_claims_renews_completes_fails_and_honours_cancel():
    events = []

    def handler(task, ctx):
        if task["type"] == "pysdk.boom":
            raise RuntimeError("boom\n  at line 2")  # the hub takes one line: the SDK joins them
        if task["type"] == "pysdk.slow":
            time.sleep(5)  # longer than the 3 s lease: the renewals keep it
            return {"slow": True}
        if task["type"] == "pysdk.wait":
            ctx.cancelled.wait(30)
            return {"never": "reported"}
        ctx.progress("started")
        # A task made of an A2A message carries it whole: {"message": {..., "parts": [{"data": {"n": 7}}]}}.
        data = next(p["data"] for p in task["payload"]["message"]["parts"] if "data" in p)
        return {"echo": data["n"]}

    node = new_node(
        "worker",
        register={"name": "py-worker", "capabilities": {"declared": ["summarize"]}},
        worker=handler,
        max_tasks=4,
        task_poll_s=0.3,
    )
    node.on("task", events.append)
    node.start()
    approve(node.node_id)
    eventually(lambda: node.state == "online", 15, "the worker online")

    def task(tid):
        return httpx.get(
            f"{E['ZHONGSHU_TEST_A2A']}/a2a/task/{tid}", headers={"x-zr-token": E["ZHONGSHU_TEST_REVIEWER"]}
        ).json()["task"]

    summarize = ("summarize",)
    kinds = [("pysdk.echo", summarize), ("pysdk.slow", summarize), ("pysdk.boom", summarize), ("pysdk.wait", summarize)]
    echo, slow, boom, wait, gpu = a2a_send([*kinds, ("pysdk.gpu", ("gpu",))])
    eventually(lambda: any(e["task_id"] == wait for e in events), 10, "the waiting task claimed")
    assert control("POST", "/task/cancel", {"task_id": wait})["canceled"]
    settled = lambda tid: any(e["task_id"] == tid and e["state"] != "claimed" for e in events)  # noqa: E731
    eventually(lambda: all(settled(t) for t in (echo, slow, boom, wait)), 20, "every task settled")
    assert task(echo)["state"] == "done" and task(echo)["result"] == {"echo": 7}
    assert task(slow)["state"] == "done" and task(slow)["attempts"] == 1
    assert task(boom)["state"] == "failed" and task(boom)["error"] == "boom at line 2"
    assert task(wait)["state"] == "canceled"
    assert [e["state"] for e in events if e["task_id"] == wait] == ["claimed", "canceled"]
    # What the A2A client sees of the same tasks.
    assert a2a_states([echo, boom, wait, gpu]) == [
        ("TASK_STATE_COMPLETED", [{"echo": 7}]),
        ("TASK_STATE_FAILED", []),
        ("TASK_STATE_CANCELED", []),
        ("TASK_STATE_SUBMITTED", []),
    ]
    assert task(gpu)["state"] == "queued"  # needs a capability the node lacks
    node.stop()


def a2a_reply(task_id, context_id, text):
    """A text answer to a task waiting for input, in its task and context (multi-turn), from the A2A client."""
    from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest

    async def run(client):
        message = Message(
            message_id=str(uuid.uuid4()),
            task_id=task_id,
            context_id=context_id,
            role=Role.ROLE_USER,
            parts=[Part(text=text)],
        )
        return [reply async for reply in client.send_message(SendMessageRequest(message=message))]

    return a2a_client(run)


def a2a_task(tid):
    """The task as the A2A client sees it: state, context, status message text, artifacts' texts and data."""
    from a2a.types.a2a_pb2 import GetTaskRequest, TaskState
    from google.protobuf.json_format import MessageToDict

    async def run(client):
        task = await client.get_task(GetTaskRequest(id=tid))
        texts = ["".join(p.text for p in a.parts if p.HasField("text")) for a in task.artifacts]
        return {
            "state": TaskState.Name(task.status.state),
            "context_id": task.context_id,
            "message": "".join(p.text for p in task.status.message.parts if p.HasField("text")),
            "texts": [t for t in texts if t],
            "data": [MessageToDict(p)["data"] for a in task.artifacts for p in a.parts if p.HasField("data")],
        }

    return a2a_client(run)


def test_worker_sends_artifacts_asks_for_input_and_answers_with_a_message():
    events, histories = [], []

    def handler(task, ctx):
        histories.append(task["history"])
        if not task["history"]:
            ctx.artifact({"artifactId": "draft", "parts": [{"text": "first "}]}, last_chunk=False)
            ctx.artifact({"artifactId": "draft", "parts": [{"text": "draft"}]}, append=True)
            ctx.ask_for_input("Which language?")
            assert ctx.cancelled.is_set()  # nothing more is reported this turn
            return {"never": "reported"}
        language = "".join(p.get("text", "") for p in task["history"][-1]["parts"])
        return TaskCompletion(result={"language": language}, message=f"translated into {language}")

    node = new_node(
        "conversing",
        register={"name": "py-conversing", "capabilities": {"declared": ["translate"]}},
        worker=handler,
        task_poll_s=0.3,
    )
    node.on("task", events.append)
    node.start()
    approve(node.node_id)
    eventually(lambda: node.state == "online", 15, "the node online")
    (tid,) = a2a_send([("pysdk.translate", ("translate",))])
    asked = lambda: any(e["task_id"] == tid and e["state"] == "input_required" for e in events)  # noqa: E731
    eventually(asked, 20, "the node asking for input")
    waiting = a2a_task(tid)
    assert waiting["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert waiting["message"] == "Which language?" and waiting["texts"] == ["first draft"]
    a2a_reply(tid, waiting["context_id"], "French")
    eventually(lambda: any(e["task_id"] == tid and e["state"] == "done" for e in events), 20, "the task done")
    assert len(histories) == 2 and "Which language?" in str(histories[1]) and "French" in str(histories[1])
    done = a2a_task(tid)
    assert done["state"] == "TASK_STATE_COMPLETED" and done["message"] == "translated into French"
    assert done["texts"] == ["first draft"] and done["data"] == [{"language": "French"}]
    assert [e["state"] for e in events if e["task_id"] == tid] == ["claimed", "input_required", "claimed", "done"]
    node.stop()


def test_instructions_pull_and_ack():
    node = new_node("reader", did="did:example:python-sdk-orders", verify=False)
    node.start()
    main, admin = E["ZHONGSHU_TEST_MAIN"], {"authorization": f"Bearer {E['ZHONGSHU_TEST_ADMIN']}"}

    def dal(body, did):
        return httpx.post(f"{main}/dal/deploy", json=body, headers={**admin, "x-did": did}, timeout=30)

    # The operator's side: a DID of this node's own (linked to it), and a work order for it, approved.
    assert httpx.post(f"{main}/admin/dids", json={"did": node.did}, headers=admin).status_code in (200, 201)
    linked = dal(
        {"action": "did_register", "did": node.did, "node_id": node.node_id, "autonomy_level": 0, "channels": []},
        node.did,
    )
    assert linked.status_code == 200, linked.text
    assert node.instructions() == []
    order = {"action": "inbox_push", "key": "KERNEL.EVOLUTION.DIRECTIVE.pysdk", "value": {"directive_action": "noop"}}
    pushed = dal({**order, "node_id": node.node_id}, E["ZHONGSHU_TEST_DID"])
    assert pushed.status_code == 202, pushed.text
    approval, instruction = pushed.json()["approval_id"], pushed.json()["instruction_id"]
    eventually(
        lambda: reviewer("POST", f"{main}/api/truth/approvals/{approval}/approve", {"reason": "py"}).status_code == 200,
        30,
        "the work order approved",
    )
    # The node's side: pull, acknowledge once, and the queue no longer lists it.
    orders = eventually(lambda: node.instructions(), 30, "the work order queued")
    assert [(o["instruction_id"], o["value"], o["acked_at"]) for o in orders] == [(instruction, order["value"], None)]
    acked = node.ack_instruction(instruction)
    assert acked["instruction_id"] == instruction and acked["already_acked"] is False
    assert node.ack_instruction(instruction)["already_acked"] is True
    assert node.instructions() == []
    assert [o["acked_at"] is not None for o in node.instructions(include_acked=True)] == [True]
    with pytest.raises(HubError) as refused:
        node.ack_instruction("wo_" + "0" * 24)
    assert refused.value.status == 404
    assert node.status()["truth_count"] >= 1000  # the writes of the tests before
    node.stop()


def test_tampered_proof_and_forged_checkpoint_are_reported():
    errors = []
    node = new_node("verifier", hub_url=E["ZHONGSHU_TEST_PROXY"], heartbeat=False)
    node.on("error", errors.append)
    node.start()
    control("POST", "/proxy", {"tamper_proof": True})
    h = node.write("pysdk.verify.one", {"checked": True})
    h.result(timeout=20)
    err = eventually(
        lambda: next((e for e in errors if isinstance(e, VerificationError) and e.kind == "inclusion"), None),
        15,
        "inclusion",
    )
    assert "not proven" in str(err)
    assert node.outbox.get(h.id).verified_size is None
    control("POST", "/proxy", {"tamper_checkpoint": True})
    node.write("pysdk.verify.two", {"checked": True}).result(timeout=20)
    eventually(
        lambda: any(isinstance(e, VerificationError) and e.kind == "checkpoint_signature" for e in errors),
        15,
        "signature",
    )
    with pytest.raises(VerificationError):
        node.verify_now()
    control("POST", "/proxy", {})
    eventually(lambda: node.outbox.counts()["unverified"] == 0, 15, "verified once honest")
    node.stop()


def test_witness_cosignatures_k_of_n():
    # The control server is the witness: it cosigns the checkpoints the proxy serves, honestly or not.
    errors = []
    node = new_node(
        "witnessed",
        hub_url=E["ZHONGSHU_TEST_PROXY"],
        heartbeat=False,
        witnesses=[control("GET", "/witness")["key"]],
        witness_quorum=1,
    )
    node.on("error", errors.append)
    node.start()
    try:
        # No cosignature: the checkpoint proves nothing yet; the write waits, and no verification error is raised.
        control("POST", "/proxy", {"clear_arrivals": True})
        h = node.write("pysdk.witnessed.one", {"witnessed": True})
        h.result(timeout=20)
        rounds = lambda: len(control("GET", "/proxy/arrivals", prefix="/tlog/checkpoint")["at_ms"])  # noqa: E731
        eventually(lambda: rounds() >= 3, 15, "verification rounds")
        assert node.outbox.get(h.id).verified_size is None
        assert errors == []
        # A line with the witness's name and key id signed by another key: a forgery.
        control("POST", "/proxy", {"cosign": "forged"})
        eventually(
            lambda: any(isinstance(e, VerificationError) and e.kind == "checkpoint_cosignature" for e in errors),
            15,
            "a cosignature error",
        )
        assert node.outbox.get(h.id).verified_size is None
        # The witness's own cosignature: the write is proven.
        control("POST", "/proxy", {"cosign": "honest"})
        eventually(lambda: node.outbox.counts()["unverified"] == 0, 15, "verified once witnessed")
    finally:
        control("POST", "/proxy", {})
        node.stop()


def test_backs_off_as_retry_after_asks_on_429_and_503():
    control(
        "POST",
        "/proxy",
        {
            "clear_arrivals": True,
            "refuse": [
                {"prefix": "/api/report/truth", "status": 429, "retry_after_s": 2, "times": 1},
                {"prefix": "/a2a/heartbeat", "status": 503, "retry_after_s": 2, "times": 1},
            ],
        },
    )
    node = new_node("patient", hub_url=E["ZHONGSHU_TEST_PROXY"])
    node.start()
    h = node.write("pysdk.backoff.one", {"waited": True})
    assert h.result(timeout=20).state == "acknowledged"
    eventually(
        lambda: len(control("GET", "/proxy/arrivals", prefix="/a2a/heartbeat")["at_ms"]) >= 2, 10, "a second beat"
    )
    for prefix in ("/api/report/truth", "/a2a/heartbeat"):
        at = control("GET", "/proxy/arrivals", prefix=prefix)["at_ms"]
        assert at[1] - at[0] >= 2000, (prefix, at)
    assert ledger_keys("pysdk.backoff.") == ["pysdk.backoff.one"]
    node.stop()
    control("POST", "/proxy", {})


def test_no_node_key_in_the_log():
    import json

    keys = []
    for name in os.listdir(E["ZHONGSHU_TEST_SCRATCH"]):
        path = os.path.join(E["ZHONGSHU_TEST_SCRATCH"], name, "credentials.json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                keys.append(json.load(f)["api_key"])
    assert len(keys) >= 3
    with open(E["ZHONGSHU_TEST_LOG"], encoding="utf-8") as f:
        text = f.read()
    assert "node registered" in text and ("truth write deferred" in text or "failed to reach the hub" in text)
    for key in keys:
        assert key not in text
