"""The Python node of bench:sdk (scripts/bench/sdk.ts): writes BENCH_SDK_WRITES truths through the Python SDK's
HubNode as fast as the caller can, then waits until every one is acknowledged. Prints one JSON line: each write()
call's duration and each write's time from its call to its acknowledgement, in milliseconds.
Argument: a JSON object {"hub", "did", "state_dir", "writes", "prefix"}."""

import json
import sys
import threading
import time

from zhongshu_node import HubNode


def main() -> None:
    args = json.loads(sys.argv[1])
    node = HubNode(hub_url=args["hub"], state_dir=args["state_dir"], did=args["did"], heartbeat=False, verify=False)
    node.start()
    calls, called_at, acked, early = [], {}, {}, {}
    lock = threading.Lock()
    done = threading.Event()
    total = args["writes"]

    def on_write(record) -> None:
        if record.state != "acknowledged":
            return
        now = time.perf_counter()
        with lock:
            if record.id not in called_at:
                early[record.id] = now  # acknowledged before its call's start was recorded
            elif record.id not in acked:
                acked[record.id] = (now - called_at[record.id]) * 1000
            if len(acked) == total:
                done.set()

    node.on("write", on_write)
    started = time.perf_counter()
    for i in range(total):
        t0 = time.perf_counter()
        handle = node.write(f"{args['prefix']}.{i}", {"i": i, "bench": "sdk"})
        t1 = time.perf_counter()
        calls.append((t1 - t0) * 1000)
        with lock:
            called_at[handle.id] = t0
            if handle.id in early:
                acked[handle.id] = (early.pop(handle.id) - t0) * 1000
                if len(acked) == total:
                    done.set()
    written_in = time.perf_counter() - started
    landed = done.wait(600)
    landed_in = time.perf_counter() - started
    node.stop()
    print(
        json.dumps(
            {
                "calls": calls,
                "acks": list(acked.values()),
                "written_s": written_in,
                "landed_s": landed_in,
                "landed": landed,
            }
        )
    )


if __name__ == "__main__":
    main()
