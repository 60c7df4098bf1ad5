"""The durable loop end to end, in-process, against real Postgres and real DBOS."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from dbos_agents import (
    AgentClient,
    AgentRuntime,
    DatabaseUnavailableError,
    SessionBusyError,
    UnknownAgentError,
    _dbos,
)
from dbos_agents._dbos.internals import _system_database
from dbos_agents.ids import agent_queue

from .agents import CONTEXTS, EFFECTS
from .polling import until

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


async def test_support_session_runs_tools_and_records_everything(runtime: AgentRuntime) -> None:
    h = await runtime.start("support", "refund order 42", user_id="u1", tenant_id="t1")
    out = await h.result()
    assert out.status == "completed"
    assert out.output == "refunded; said: refund order 42"
    assert out.turns == 3
    hist = await h.history()
    assert [m.role for m in hist] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert json.loads(hist[2].content or "") == {"id": "42", "total_cents": 4200}
    ledger = await h.tool_calls()
    assert [(c.tool, c.status, c.attempts) for c in ledger] == [
        ("get_order", "completed", 1),
        ("refund", "completed", 1),
    ]
    refund_key = ledger[1].idempotency_key
    assert EFFECTS[refund_key] == 1
    ctx = next(c for c in CONTEXTS if c.idempotency_key == refund_key)
    assert (ctx.session_id, ctx.root_session_id, ctx.user_id, ctx.tenant_id) == (
        h.session_id,
        h.session_id,
        "u1",
        "t1",
    )
    assert ctx.tool_call_id == ledger[1].tool_call_id
    info = await h.status()
    assert info.status == "completed" and info.turns == 3
    assert info.usage.input_tokens > 0 and info.usage.cost_usd > 0


async def test_parallel_tool_calls_run_concurrently_in_call_order(runtime: AgentRuntime) -> None:
    """The three slow calls meet at a 3-party barrier inside their handlers: run one after
    another, the first would wait alone and fail with a tool error."""
    h = await runtime.start("parallel", "go")
    out = await h.result()
    assert out.status == "completed"
    tool_msgs = [m for m in await h.history() if m.role == "tool"]
    assert [m.content for m in tool_msgs[:3]] == ["ok a", "ok b", "ok c"]
    assert [m.tool_call_id for m in tool_msgs] == ["call_1_1", "call_1_2", "call_1_3", "call_1_4"]
    for key in (f"sync:{h.session_id}:a", f"async:{h.session_id}:b", f"sync:{h.session_id}:c"):
        assert EFFECTS[key] == 1


async def test_tool_failures_become_results_the_model_sees(runtime: AgentRuntime) -> None:
    h = await runtime.start("faulty", "break things")
    out = await h.result()
    assert out.status == "completed" and out.output == "recovered from errors"
    results = {
        m.tool_call_id: json.loads(m.content or "")["error"]
        for m in await h.history()
        if m.role == "tool"
    }
    assert results["call_1_1"]["kind"] == "tool-error"
    assert "RuntimeError: kaboom: x" in results["call_1_1"]["message"]
    assert results["call_1_2"]["kind"] == "invalid-arguments"
    assert {e["loc"][0] for e in results["call_1_2"]["details"]} == {"order_id", "cents"}
    assert results["call_1_3"]["kind"] == "invalid-arguments"
    assert results["call_1_4"]["kind"] == "unknown-tool"
    assert results["call_1_5"]["kind"] == "invalid-arguments"  # extra argument forbidden
    ledger = {c.tool_call_id: c for c in await h.tool_calls()}
    assert ledger["call_1_1"].status == "failed" and ledger["call_1_1"].attempts == 1
    assert ledger["call_1_2"].attempts == 0  # never dispatched


async def test_max_turns_stops_after_the_last_turns_tools(runtime: AgentRuntime) -> None:
    h = await runtime.start("looper", "loop")
    out = await h.result()
    assert out.status == "max_turns" and out.turns == 3
    hist = await h.history()
    assert sum(m.role == "assistant" for m in hist) == 3
    assert sum(m.role == "tool" for m in hist) == 3  # every call got its result
    assert (await h.status()).status == "max_turns"


async def test_token_budget_stops_the_run(runtime: AgentRuntime) -> None:
    h = await runtime.start("spender", "spend")
    out = await h.result()
    assert out.status == "budget_exhausted"
    assert out.usage.total_tokens >= 150
    assert 1 <= out.turns < 20
    calls = await h.tool_calls()
    assert all(c.status == "completed" for c in calls) and len(calls) == out.turns


async def test_follow_up_continues_without_duplicating_messages(runtime: AgentRuntime) -> None:
    h = await runtime.start("chat", "hello")
    assert (await h.result()).output == "echo 0: hello"
    h2 = await runtime.send(h.session_id, "again")
    assert h2.workflow_id == f"{h.session_id}::run::2"
    assert (await h2.result()).output == "echo 1: again"
    hist = await h2.history()
    assert [(m.role, m.content, m.run_seq) for m in hist] == [
        ("user", "hello", 1),
        ("assistant", "echo 0: hello", 1),
        ("user", "again", 2),
        ("assistant", "echo 1: again", 2),
    ]
    info = await h2.status()
    assert info.run_seq == 2 and info.turns == 2


async def test_message_to_a_busy_session_is_refused(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    # Busy for sure: the run waits for a client tool's answer (a run that could finish on
    # its own might end before the send on a loaded machine, and the send would succeed).
    h = await runtime.start("asker", "go")
    await until(lambda: client.pending(session_id=h.session_id), "the run waits")
    with pytest.raises(SessionBusyError):
        await runtime.send(h.session_id, "too soon")
    await asyncio.to_thread(client.interrupt, h.session_id)
    assert (await h.result()).status == "interrupted"
    assert sum(m.role == "user" for m in await h.history()) == 1


async def test_transient_model_errors_are_retried(runtime: AgentRuntime) -> None:
    h = await runtime.start("flaky", "transient-1")
    out = await h.result()
    assert out.status == "completed" and out.output == "answered after retries"


async def test_model_that_keeps_failing_fails_the_run_clearly(runtime: AgentRuntime) -> None:
    h = await runtime.start("flaky", "always-down")
    out = await h.result()
    assert out.status == "failed"
    assert out.error is not None and "503 unavailable" in out.error
    assert (await h.status()).status == "failed"


async def test_duplicate_tool_call_ids_are_made_unique(runtime: AgentRuntime) -> None:
    h = await runtime.start("dupes", "x")
    assert (await h.result()).status == "completed"
    ids = [c.tool_call_id for c in await h.tool_calls()]
    assert len(ids) == len(set(ids)) == 3


async def test_unknown_agent_is_a_typed_error(runtime: AgentRuntime) -> None:
    with pytest.raises(UnknownAgentError, match="nobody"):
        await runtime.start("nobody", "hi")


async def test_unreachable_database_fails_fast_naming_the_host() -> None:
    from dbos_agents.models import ScriptedModel

    rt = AgentRuntime([], ScriptedModel(["x"]), database_url="postgresql://u@127.0.0.1:1/db")
    t0 = time.monotonic()
    with pytest.raises(DatabaseUnavailableError, match=r"127\.0\.0\.1:1/db"):
        await rt.launch()
    assert time.monotonic() - t0 < 30  # generous: "fast" means not DBOS's long retry loop


async def test_a_run_of_an_agent_this_worker_lacks_waits_on_its_agents_queue(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    """A run reaches a worker that lacks its agent through the shared queue (an earlier
    release enqueued it there) or DBOS's internal one (a recovered child workflow): it goes
    back to its agent's queue, unrun, instead of failing and losing the user's message."""
    import asyncio

    import sqlalchemy as sa

    sid = await asyncio.to_thread(client.start, "nobody_here", "hi")
    own = agent_queue(runtime.settings.queue_name, "nobody_here")
    ws = f"{_dbos.quoted(runtime.settings.dbos_system_schema)}.workflow_status"

    def row() -> tuple[str, str, int]:
        with client.engine.connect() as conn:
            r = conn.execute(
                sa.text(
                    f"SELECT status, queue_name, recovery_attempts FROM {ws} WHERE workflow_uuid = :w"
                ),
                {"w": sid},
            ).one()
        return str(r[0]), str(r[1]), int(r[2])

    await asyncio.sleep(0.5)
    assert row()[:2] == ("ENQUEUED", own)  # nobody here listens to its queue
    with client.engine.begin() as conn:  # as an earlier release enqueued it: the shared queue
        conn.execute(
            sa.text(f"UPDATE {ws} SET queue_name = :q WHERE workflow_uuid = :w"),
            {"q": runtime.settings.queue_name, "w": sid},
        )
        conn.execute(
            sa.text("SELECT pg_notify('dbos_agents_starts', :q)"),
            {"q": runtime.settings.queue_name},
        )
    deadline = asyncio.get_running_loop().time() + 20
    while (now := row())[2] == 0:  # not yet claimed by this worker
        assert asyncio.get_running_loop().time() < deadline, now
        await asyncio.sleep(0.05)
    while row()[:2] != ("ENQUEUED", own):
        assert asyncio.get_running_loop().time() < deadline, row()
        await asyncio.sleep(0.05)
    info = await asyncio.to_thread(client.session, sid)
    assert info.status == "queued" and info.error is None
    queued = await asyncio.to_thread(client.queued_runs)
    assert [q.runs for q in queued if q.agent == "nobody_here"] == [1]


async def test_dbos_operations_check_connections_out_unpinged(
    runtime: AgentRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every DBOS operation checks a system-database connection out; a ping each was about
    a fifth of a resumed turn's round trips (a dead connection is retried instead)."""
    engine = _system_database().engine
    pings: list[object] = []
    ping = engine.dialect.do_ping

    def counted(conn: object) -> bool:
        pings.append(conn)
        return bool(ping(conn))

    monkeypatch.setattr(engine.dialect, "do_ping", counted)
    h = await runtime.start("support", "refund order 42")
    assert (await h.result()).status == "completed"
    assert pings == []
