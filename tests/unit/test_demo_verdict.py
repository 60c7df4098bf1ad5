"""The demo's claims, checked on what it saw: each way it can fail to show them has its
own reason (``dbos_agents.demo.verdict``; the runs themselves: tests/integration)."""

from __future__ import annotations

import signal
import socket
from dataclasses import replace

from dbos_agents.demo import DEMO_EXECUTOR, Peer, Shown, verdict

SHOWN = Shown(
    crash_exit=-signal.SIGKILL,
    status="completed",
    error=None,
    refunds=1,
    executors=[DEMO_EXECUTOR],
    others=[],
    log_tail="",
)


def test_a_crash_one_refund_and_a_completed_session_pass() -> None:
    assert verdict(SHOWN) is None


def test_another_worker_is_named_with_how_to_stop_it() -> None:
    here = Peer("worker-vm", socket.gethostname(), 4242, 3.0)
    there = Peer("worker-b", "host-b", 7, 1.0)
    why = verdict(replace(SHOWN, others=[here, there], crash_exit=None, refunds=0))
    assert why is not None and why.startswith("another worker is running on this database")
    assert "worker-vm (pid 4242 on this host" in why and "kill 4242" in why
    assert "worker-b (pid 7 on host-b" in why and "Ctrl-C" in why


def test_a_worker_that_came_and_went_is_seen_by_who_ran_the_session() -> None:
    why = verdict(replace(SHOWN, executors=[DEMO_EXECUTOR, "worker-vm"], crash_exit=None))
    assert why is not None and "worker-vm" in why and "ran the demo's session" in why


def test_a_failed_session_says_why() -> None:
    error = "ModelError: refusing to call gpt-4.1-mini at https://api.openai.com/v1"
    why = verdict(replace(SHOWN, crash_exit=None, status="failed", error=error))
    assert why == f"the demo's session ended failed: {error}"


def test_no_crash_and_a_worker_that_died_otherwise_are_failures() -> None:
    why = verdict(replace(SHOWN, crash_exit=None))
    assert why is not None and "crash point" in why
    why = verdict(replace(SHOWN, crash_exit=1, status="queued", log_tail="boom"))
    assert why is not None and "exited with status 1" in why and "boom" in why


def test_refunds_must_be_exactly_one() -> None:
    for n in (0, 2):
        why = verdict(replace(SHOWN, refunds=n))
        assert why is not None and f"{n} refund" in why
