"""Client tools, approvals, submits, sub-agent routing and interrupts, in-process worker."""

from __future__ import annotations

import asyncio
import json
import logging
from concurrent.futures import ThreadPoolExecutor

import pytest
import sqlalchemy as sa
from dbos._serialization import deserialize_value

from dbos_agents import (
    AgentClient,
    AgentRuntime,
    InvalidRequestError,
    InvalidResultError,
    NotRootSessionError,
    PendingCall,
)

from .agents import EFFECTS

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


async def _pending(
    client: AgentClient, sid: str, n: int = 1, wait_s: float = 30
) -> list[PendingCall]:
    for _ in range(int(wait_s / 0.05)):
        rows = await asyncio.to_thread(client.pending, session_id=sid)
        if len(rows) >= n:
            return rows
        await asyncio.sleep(0.05)
    raise TimeoutError(f"no pending call for {sid}")


def _tool_results(history: list) -> list[dict]:
    return [json.loads(m.content) for m in history if m.role == "tool"]


async def test_client_tool_round_trip(runtime: AgentRuntime, client: AgentClient) -> None:
    h = await runtime.start("asker", "ship it?", user_id="u9", tenant_id="t9")
    (p,) = await _pending(client, h.session_id)
    assert (p.kind, p.tool, p.owner_session_id, p.status) == (
        "client",
        "confirm",
        h.session_id,
        "waiting",
    )
    assert p.arguments == {"question": "ship it?"}
    assert p.output_schema is not None and "ok" in p.output_schema["properties"]
    assert (p.tenant_id, p.user_id) == ("t9", "u9")
    # The agent's 10-minute timeout applies (per tool > per agent > 5 min default).
    assert 590 < (p.deadline - p.created_at).total_seconds() <= 600
    out = await asyncio.to_thread(
        client.submit_tool_result, h.session_id, p.tool_call_id, result={"ok": True, "note": "yes"}
    )
    assert out.status == "accepted"
    res = await h.result()
    assert res.status == "completed"
    assert res.output == 'asker got: {"note":"yes","ok":true}'
    again = await asyncio.to_thread(
        client.submit_tool_result, h.session_id, p.tool_call_id, result={"ok": False}
    )
    assert again.status == "already_completed"
    (tomb,) = await asyncio.to_thread(
        client.pending, session_id=h.session_id, include_resolved=True
    )
    assert tomb.status == "resolved" and tomb.resolved_at is not None


async def test_an_accepted_submit_is_two_statements(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    """A read (the wait and its run's DBOS status), then one statement that marks the wait
    and sends the message, without a transaction around them: each round trip of a submit
    is one the submitter and the resumed run wait on."""
    h = await runtime.start("asker", "ship it?")
    (p,) = await _pending(client, h.session_id)
    seen: list[str] = []

    def statement(conn: object, cursor: object, sql: str, *rest: object) -> None:
        seen.append(" ".join(sql.split()))

    sa.event.listen(client.engine, "before_cursor_execute", statement)
    try:
        out = await asyncio.to_thread(
            client.submit_tool_result, h.session_id, p.tool_call_id, result={"ok": True}
        )
    finally:
        sa.event.remove(client.engine, "before_cursor_execute", statement)
    assert out.status == "accepted"
    assert [s.split()[0] for s in seen] == ["SELECT", "WITH"], seen
    assert (await h.result()).status == "completed"
    (row,) = await asyncio.to_thread(client.pending, session_id=h.session_id, include_resolved=True)
    assert row.status == "resolved"
    # The message is the row DBOS's own send writes (sent here again under another key).
    client.dbos.send(h.workflow_id, row.submission, topic="compare", idempotency_key="k")

    def message(topic: str) -> tuple[object, ...]:
        with client.engine.connect() as conn:
            return tuple(
                conn.execute(
                    sa.text(
                        "SELECT message_uuid, message, serialization FROM dbos.notifications"
                        " WHERE destination_uuid = :wf AND topic = :t"
                    ),
                    {"wf": h.workflow_id, "t": topic},
                ).one()
            )

    ours, dbos_own = message(p.tool_call_id), message("compare")
    assert ours[0] == f"{p.tool_call_id}::{h.workflow_id}" and dbos_own[0] == f"k::{h.workflow_id}"
    assert ours[2] == dbos_own[2]
    serializer = client.dbos._sys_db.serializer
    assert deserialize_value(ours[1], ours[2], serializer) == row.submission
    assert deserialize_value(dbos_own[1], dbos_own[2], serializer) == row.submission


async def test_invalid_result_is_refused_and_changes_nothing(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    h = await runtime.start("asker", "q")
    (p,) = await _pending(client, h.session_id)
    with pytest.raises(InvalidResultError) as exc:
        await asyncio.to_thread(
            client.submit_tool_result, h.session_id, p.tool_call_id, result={"ok": "maybe"}
        )
    assert exc.value.code == "INVALID_RESULT"
    assert exc.value.errors[0]["path"] == "ok"
    (still,) = await asyncio.to_thread(client.pending, session_id=h.session_id)
    assert still.status == "waiting"
    # An error submission skips validation and reaches the model as an error result.
    out = await asyncio.to_thread(
        client.submit_tool_result, h.session_id, p.tool_call_id, error="user closed the dialog"
    )
    assert out.status == "accepted"
    await h.result()
    (r,) = _tool_results(await h.history())
    assert r["error"]["kind"] == "client-error" and "closed the dialog" in r["error"]["message"]


async def test_fifty_concurrent_identical_submits_deliver_once(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    h = await runtime.start("asker", "race")
    (p,) = await _pending(client, h.session_id)

    def one(_: int) -> str:
        return client.submit_tool_result(h.session_id, p.tool_call_id, result={"ok": True}).status

    with ThreadPoolExecutor(max_workers=16) as pool:
        statuses = await asyncio.to_thread(lambda: list(pool.map(one, range(50))))
    assert statuses.count("accepted") == 1
    assert statuses.count("already_completed") == 49
    await h.result()
    hist = await h.history()
    assert len([m for m in hist if m.role == "tool"]) == 1


async def test_timeout_then_late_answer_gets_one_notice(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    h = await runtime.start("impatient", "hurry")
    res = await h.result()
    (r,) = _tool_results(await h.history())
    assert r["error"]["kind"] == "client_tool_timeout"
    assert (
        res.output
        == f"impatient got: {json.dumps(r, separators=(',', ':'), sort_keys=True)} notes=0"
    )
    (tomb,) = await asyncio.to_thread(
        client.pending, session_id=h.session_id, include_resolved=True
    )
    assert tomb.status == "timed_out"
    late = await asyncio.to_thread(
        client.submit_tool_result, h.session_id, tomb.tool_call_id, result={"ok": True}
    )
    assert late.status == "late_answer_after_timeout"
    again = await asyncio.to_thread(
        client.submit_tool_result, h.session_id, tomb.tool_call_id, result={"ok": True}
    )
    assert again.status == "late_answer_after_timeout"
    # The model hears about it once, on its next turn (a follow-up run here).
    h2 = await runtime.send(h.session_id, "anything new?")
    await h2.result()
    notes = [m for m in await h2.history() if m.role == "system"]
    assert len(notes) == 1 and "arrived after that call had timed out" in (notes[0].content or "")


async def test_late_answer_during_the_run_reaches_the_next_turn(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    """A late answer that arrives while the same run waits on a later call: the model
    step after that call records the notice in its own transaction, before its turn."""
    h = await runtime.start("latecomer", "go")
    waiting = await _pending(client, h.session_id)
    while [p.tool for p in waiting] != ["confirm"]:  # confirm_fast times out after 1 s
        await asyncio.sleep(0.05)
        waiting = await asyncio.to_thread(client.pending, session_id=h.session_id)
    (tomb,) = [
        p
        for p in await asyncio.to_thread(
            client.pending, session_id=h.session_id, include_resolved=True
        )
        if p.tool == "confirm_fast"
    ]
    late = await asyncio.to_thread(
        client.submit_tool_result, h.session_id, tomb.tool_call_id, result={"ok": True}
    )
    assert late.status == "late_answer_after_timeout"
    ok = await asyncio.to_thread(
        client.submit_tool_result, h.session_id, waiting[0].tool_call_id, result={"ok": False}
    )
    assert ok.status == "accepted"
    res = await h.result()
    assert res.output is not None and res.output.endswith("notes=1")
    hist = await h.history()
    roles = [m.role for m in hist]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "system", "assistant"]
    assert "arrived after that call had timed out" in (hist[5].content or "")
    assert [m.seq for m in hist] == list(range(1, len(hist) + 1))


async def test_submit_before_recv_is_buffered(runtime: AgentRuntime, client: AgentClient) -> None:
    """The row exists as soon as write #1+register commit; the recv may come later."""
    h = await runtime.start("asker", "buffer")
    (p,) = await _pending(client, h.session_id)
    out = await asyncio.to_thread(
        client.submit_tool_result, h.session_id, p.tool_call_id, result={"ok": True}
    )
    assert out.status == "accepted"
    assert (await h.result()).status == "completed"


async def test_approve_and_deny(runtime: AgentRuntime, client: AgentClient) -> None:
    yes = await runtime.start("closer", "close it")
    no = await runtime.start("closer", "close it")
    (py,) = await _pending(client, yes.session_id)
    (pn,) = await _pending(client, no.session_id)
    assert py.kind == "approval" and py.output_schema is None
    with pytest.raises(InvalidRequestError, match="waits for an approval"):
        await asyncio.to_thread(
            client.submit_tool_result, yes.session_id, py.tool_call_id, result={"ok": True}
        )
    assert (
        await asyncio.to_thread(client.submit_approval, yes.session_id, py.tool_call_id, True)
    ).status == "accepted"
    assert (
        await asyncio.to_thread(
            client.submit_approval, no.session_id, pn.tool_call_id, False, "not today"
        )
    ).status == "accepted"
    await yes.result()
    await no.result()
    assert EFFECTS[f"close:{yes.session_id}:acc-1"] == 1
    assert EFFECTS[f"close:{no.session_id}:acc-1"] == 0
    assert _tool_results(await yes.history()) == [{"closed": "acc-1"}]
    (denied,) = _tool_results(await no.history())
    assert (
        denied["error"]["kind"] == "approval-denied" and "not today" in denied["error"]["message"]
    )


async def test_kind_mismatch_for_client_call(runtime: AgentRuntime, client: AgentClient) -> None:
    h = await runtime.start("asker", "kind")
    (p,) = await _pending(client, h.session_id)
    with pytest.raises(InvalidRequestError, match="waits for a client-tool result"):
        await asyncio.to_thread(client.submit_approval, h.session_id, p.tool_call_id, True)
    await asyncio.to_thread(client.fail, h.session_id, p.tool_call_id, "operator gave up")
    await h.result()


async def test_unknown_tool_call_and_unknown_session(
    client: AgentClient, runtime: AgentRuntime
) -> None:
    out = await asyncio.to_thread(client.submit_tool_result, "ses_nope", "call_x", result={})
    assert (out.status, out.reason) == ("unknown_tool_call", "no_session")
    h = await runtime.start("chat", "hi")
    await h.result()
    out = await asyncio.to_thread(client.submit_tool_result, h.session_id, "call_x", result={})
    assert (out.status, out.reason) == ("unknown_tool_call", "no_pending_call")


async def test_sub_agent_routing_two_levels_deep(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    h = await runtime.start("boss", "go deep")
    (p,) = await _pending(client, h.session_id)
    leaf_session = p.owner_session_id
    assert leaf_session.startswith(f"{h.session_id}::sub::") and leaf_session.count("::sub::") == 2
    assert p.root_session_id == h.session_id and p.owner_workflow_id == leaf_session
    with pytest.raises(NotRootSessionError) as exc:
        await asyncio.to_thread(
            client.submit_tool_result, leaf_session, p.tool_call_id, result={"ok": True}
        )
    assert h.session_id in str(exc.value)
    out = await asyncio.to_thread(
        client.submit_tool_result, h.session_id, p.tool_call_id, result={"ok": True, "note": "deep"}
    )
    assert out.status == "accepted"
    res = await h.result()
    assert res.status == "completed"
    assert res.output is not None and res.output.startswith("boss got: middle got: leaf got:")
    assert "deep" in res.output
    leaf = await asyncio.to_thread(client.session, leaf_session)
    assert leaf.root_session_id == h.session_id and leaf.status == "completed"


async def test_interrupt_during_wait_then_late_submit_then_continue(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    h = await runtime.start("boss", "interrupt me")
    (p,) = await _pending(client, h.session_id)
    out = await asyncio.to_thread(client.interrupt, h.session_id)
    assert p.tool_call_id in out.cancelled_calls
    assert set(out.interrupted_sessions) >= {h.session_id, p.owner_session_id}
    late = await asyncio.to_thread(
        client.submit_tool_result, h.session_id, p.tool_call_id, result={"ok": True}
    )
    assert (late.status, late.reason) == ("unknown_tool_call", "interrupted")
    assert (await asyncio.to_thread(client.session, h.session_id)).status == "interrupted"
    assert await asyncio.to_thread(client.pending, session_id=h.session_id) == []
    # Nothing lingers: every workflow of the tree ends (cancelled or finished).
    for wf in (h.workflow_id, p.owner_workflow_id):
        for _ in range(200):
            st = await asyncio.to_thread(
                lambda wf=wf: client.dbos.retrieve_workflow(wf).get_status()
            )
            if st is not None and st.status in ("CANCELLED", "SUCCESS", "ERROR"):
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError(f"workflow {wf} still {st.status if st else None}")
    # A new message continues the session; the interrupted call got a result first, so
    # the transcript stays well-formed for the model.
    h2 = await runtime.send(h.session_id, "start over")
    res = await h2.result()
    assert res.status == "completed"
    hist = await h2.history()
    assert [m.role for m in hist] == ["user", "assistant", "tool", "user", "assistant"]
    (interrupted,) = _tool_results(hist)
    assert interrupted["error"]["kind"] == "interrupted"
    # The sub-agent was started (it may have acted): never "it did not run".
    assert "outcome is unknown" in interrupted["error"]["message"]
    assert res.output is not None and "interrupted" in res.output


async def test_tombstones_answer_duplicates_until_reaped(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    h = await runtime.start("asker", "reap")
    (p,) = await _pending(client, h.session_id)
    await asyncio.to_thread(
        client.submit_tool_result, h.session_id, p.tool_call_id, result={"ok": True}
    )
    await h.result()
    assert await asyncio.to_thread(client.reap_tombstones, 3600) == 0  # inside the window
    dup = await asyncio.to_thread(
        client.submit_tool_result, h.session_id, p.tool_call_id, result={"ok": True}
    )
    assert dup.status == "already_completed"
    assert await asyncio.to_thread(client.reap_tombstones, 0) >= 1
    gone = await asyncio.to_thread(
        client.submit_tool_result, h.session_id, p.tool_call_id, result={"ok": True}
    )
    assert (gone.status, gone.reason) == ("unknown_tool_call", "no_pending_call")


async def test_log_events_for_the_wait_lifecycle(
    runtime: AgentRuntime, client: AgentClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="dbos_agents")
    h = await runtime.start("asker", "log me")
    (p,) = await _pending(client, h.session_id)
    await asyncio.to_thread(client.submit_tool_result, h.session_id, "call_nope", result={})
    await asyncio.to_thread(
        client.submit_tool_result, h.session_id, p.tool_call_id, result={"ok": True}
    )
    await h.result()
    events = {(getattr(r, "event", None), getattr(r, "tool_call_id", None)) for r in caplog.records}
    assert ("client_tool.suspended", p.tool_call_id) in events
    assert ("client_tool.submitted", p.tool_call_id) in events
    unknown = [
        r for r in caplog.records if getattr(r, "event", None) == "client_tool.submit_unknown"
    ]
    assert unknown and unknown[0].reason == "no_pending_call"  # type: ignore[attr-defined]
