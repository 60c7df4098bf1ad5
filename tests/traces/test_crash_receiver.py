"""Real processes: a worker whose run waits for a human (parked meanwhile), is answered,
and is SIGKILLed mid-tool, then restarted; it exports to a local OTLP receiver. One trace
for the run across the park and the restart, no second span for recorded work, and the
submit linked from the wait it released."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry import trace

from dbos_agents.testing import CrashHarness

from .receiver import Receiver
from .spans import Span, named, tree

REPO = Path(__file__).resolve().parents[2]
CALLER = trace.SpanContext(
    0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331, is_remote=True,
    trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
)  # fmt: skip
SUBMITTER = trace.SpanContext(
    0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7, is_remote=True,
    trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
)  # fmt: skip
SESSION = "ses_traced_crash"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as r:
        yield r


@pytest.fixture
def harness(fresh_database_url: str, receiver: Receiver, tmp_path: Path) -> Iterator[CrashHarness]:
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_SERVICE_NAME": "traces-test-worker",
        "OTEL_BSP_SCHEDULE_DELAY": "50",
        "DBOS_AGENTS_PARK_AFTER_SEC": "0.3",
    }
    with CrashHarness(
        "tests.traces.app:runtime", fresh_database_url, env=env, cwd=REPO, log_dir=tmp_path
    ) as h:
        yield h


def _until(pred, what: str, within: float = 60):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.05)
    raise TimeoutError(what)


def ours(spans: list[Span]) -> list[Span]:
    return [s for s in spans if s["trace"] == format(CALLER.trace_id, "032x")]


def test_one_trace_across_a_parked_wait_and_a_sigkill(
    harness: CrashHarness, receiver: Receiver
) -> None:
    client = harness.client
    worker = harness.start_worker(crash_at="after_dispatch_mark", session_id=SESSION)
    try:
        with trace.use_span(trace.NonRecordingSpan(CALLER)):
            sid = client.start("waiter", "may I?", session_id=SESSION)
        wait = _until(lambda: client.pending(session_id=sid), "the human wait")[0]
        _until(
            lambda: any(s["attributes"].get("dbos_agents.wait.end") == "suspended"
                        for s in receiver.snapshot()), "the wait to park",
        )  # fmt: skip
        with trace.use_span(trace.NonRecordingSpan(SUBMITTER)):
            out = client.submit_tool_result(sid, wait.tool_call_id, result={"ok": True})
        assert out.status == "accepted"
        assert worker.wait(timeout=60) != 0  # SIGKILLed in slow_op, after its dispatch mark
    finally:
        worker.kill()
    worker = harness.start_worker()
    try:
        assert client.wait(sid, timeout=60).status == "completed"
        _until(
            lambda: (
                len(named(ours(receiver.snapshot()), "chat scripted-model")) >= 2
                and any(s["name"] == "execute_tool slow_op" for s in receiver.snapshot())
            ),
            "the recovered execution's spans",
        )
    finally:
        worker.stop()  # SIGTERM: the worker exports its queued spans before it leaves
    _until(
        lambda: any(
            s["name"] == "invoke_agent waiter"
            and s["attributes"].get("dbos_agents.run.status") == "completed"
            for s in receiver.snapshot()
        ),
        "the recovered run's span, flushed as its worker stopped",
        within=10,
    )
    spans = ours(receiver.snapshot())
    print(tree(spans))
    assert receiver.services == {"traces-test-worker"}
    assert {s["trace"] for s in receiver.snapshot()} == {format(CALLER.trace_id, "032x")}

    runs = named(spans, "invoke_agent waiter")
    assert len(runs) >= 2  # the parked execution's, the recovered one's (the killed one's is lost)
    assert {r["parent"] for r in runs} == {format(CALLER.span_id, "016x")}
    assert runs[-1]["attributes"]["dbos_agents.run.status"] == "completed"

    turns = [c["attributes"]["dbos_agents.turn"] for c in named(spans, "chat scripted-model")]
    assert len(turns) == len(set(turns)), f"a recorded turn traced twice: {turns}"
    assert {1, 3} <= set(turns)

    confirms = named(spans, "execute_tool confirm")
    outcomes = sorted(c["attributes"]["dbos_agents.tool.outcome"] for c in confirms)
    assert outcomes == ["ok", "suspended"]  # parked, then answered; not traced on replay
    assert [w["parent"] for w in named(spans, "wait confirm")] == [c["id"] for c in confirms]
    answered = [w for w in named(spans, "wait confirm")
                if w["attributes"]["dbos_agents.wait.end"] == "answered"]  # fmt: skip
    assert len(answered) == 1
    assert answered[0]["links"] == [format(SUBMITTER.span_id, "016x")]

    slow = named(spans, "execute_tool slow_op")
    assert [s["attributes"]["dbos_agents.tool.outcome"] for s in slow] == ["ok"]
