"""tests/clients ApplyLoop: a background client loop keeps every outcome, survives a crashing apply, stops."""
from __future__ import annotations

import time

from tests.clients import ApplyLoop


def test_the_loop_records_each_apply_and_stops():
    calls = []

    def step(n: int) -> tuple[bool, str]:
        calls.append(n)
        if n == 1:
            raise RuntimeError("client crashed")
        return n != 2, "" if n != 2 else "conflict"

    loop = ApplyLoop(step, interval=0.01, name="t").start()
    deadline = time.monotonic() + 10
    while len(loop.outcomes) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    outcomes = loop.stop()
    assert [o.iteration for o in outcomes] == list(range(len(outcomes))) and len(outcomes) >= 4
    assert outcomes[0].ok and not outcomes[1].ok and "client crashed" in outcomes[1].detail
    assert not outcomes[2].ok and outcomes[2].detail == "conflict"
    assert [o.iteration for o in loop.failed] == [1, 2]
    settled = len(calls)
    time.sleep(0.05)
    assert len(calls) == settled  # stopped: no apply after stop() returned
