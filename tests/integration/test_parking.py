"""Parked waits (``Settings.park_after_sec``, 0.3 s in this suite): a long wait leaves no
coroutine behind, and a submit, an interrupt or its deadline resumes it by replay."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from typing import Any

import pytest
import sqlalchemy as sa
from dbos._sys_db import LoopAwareEvent

from dbos_agents import AgentClient, AgentRuntime, PendingCall
from dbos_agents._dbos import internals as compat
from dbos_agents._dbos import replay as _dbos_replay
from dbos_agents.loop.context import get_context
from dbos_agents.messages import Message
from dbos_agents.outcome import RunSpec
from dbos_agents.worker import SessionHandle

from .agents import EFFECTS
from .polling import until
from .test_client_tools import _pending, _tool_results
from .test_interrupts import _workflow_ends, _workflow_status

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


def _parked(workflow_id: str) -> bool:
    return get_context().receiver.is_parked(workflow_id)


async def _parked_wait(
    runtime: AgentRuntime, client: AgentClient, agent: str, message: str
) -> tuple[SessionHandle, PendingCall]:
    """Start a session whose first turn waits, and return once its wait parked."""
    h = await runtime.start(agent, message)
    (p,) = await _pending(client, h.session_id)
    await until(lambda: _parked(h.workflow_id), "the wait never parked")
    return h, p


def _first_run(h: SessionHandle, message: str) -> RunSpec:
    """The spec of a root session's first run of the agent ``asker``."""
    return RunSpec(
        session_id=h.session_id,
        root_session_id=h.session_id,
        parent_session_id=None,
        agent="asker",
        run_seq=1,
        message=message,
        user_id=None,
        tenant_id=None,
    )


def _live_waiters(workflow_id: str) -> list[object]:
    """The waiters DBOS holds for the workflow: events of live ``recv`` calls, or the
    parked stand-in."""
    sys_db = compat._system_database()
    out: list[object] = []
    for _, comp, signal in sys_db.notifications_map.snapshot():
        if comp[0] == workflow_id:
            out.extend(signal._waiters)
    return out


def _tasks_of(workflow_id: str) -> int:
    """Workflow tasks DBOS runs in this process for ``workflow_id``."""
    dbos = compat._instance()
    return sum(1 for wf in dbos._active_workflows_set._m if wf == workflow_id)


async def test_a_long_wait_parks_and_a_submit_resumes_it(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    parker = get_context().receiver
    resumed = parker.resumed_total
    h, p = await _parked_wait(runtime, client, "asker", "ship it?")
    # Parked: no live recv and no running execution of the workflow, which DBOS still
    # records as PENDING (so a restart would recover it like any waiting session).
    assert not any(isinstance(w, LoopAwareEvent) for w in _live_waiters(h.workflow_id))
    assert _tasks_of(h.workflow_id) == 0
    assert await _workflow_status(client, h.workflow_id) == "PENDING"
    assert runtime.parked >= 1
    out = await asyncio.to_thread(
        client.submit_tool_result, h.session_id, p.tool_call_id, result={"ok": True, "note": "y"}
    )
    assert out.status == "accepted"
    res = await asyncio.wait_for(h.result(), 20)
    assert res.status == "completed"
    assert res.output == 'asker got: {"note":"y","ok":true}'
    assert parker.resumed_total > resumed
    assert not _parked(h.workflow_id)
    assert len(_tool_results(await h.history())) == 1


async def test_parking_logs_no_dbos_warning(runtime: AgentRuntime, client: AgentClient) -> None:
    """DBOS warns about every cancelled workflow task; a parked one is not news."""
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    keep = Keep(logging.WARNING)
    dbos_log = logging.getLogger("dbos")
    dbos_log.addHandler(keep)
    try:
        h, p = await _parked_wait(runtime, client, "asker", "quiet?")
        await asyncio.to_thread(
            client.submit_tool_result, h.session_id, p.tool_call_id, result={"ok": True}
        )
        assert (await asyncio.wait_for(h.result(), 20)).status == "completed"
    finally:
        dbos_log.removeHandler(keep)
    assert dbos_log.isEnabledFor(logging.WARNING)
    assert not [m for m in seen if "cancelled" in m], seen


async def test_a_parked_approval_runs_its_tool_once(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    h, p = await _parked_wait(runtime, client, "closer", "close it")
    out = await asyncio.to_thread(
        client.submit_approval, h.session_id, p.tool_call_id, approved=True
    )
    assert out.status == "accepted"
    res = await asyncio.wait_for(h.result(), 20)
    assert res.status == "completed"
    assert EFFECTS[f"close:{h.session_id}:acc-1"] == 1


async def test_a_parked_wait_times_out_at_its_deadline(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    # confirm_fast times out after 1 s: parked at 0.3 s, resumed by its deadline.
    parker = get_context().receiver
    h = await runtime.start("impatient", "hurry")
    (p,) = await _pending(client, h.session_id)
    await until(lambda: _parked(h.workflow_id), "the wait never parked", within=1.5)
    res = await asyncio.wait_for(h.result(), 20)
    assert res.status == "completed"
    (r,) = _tool_results(await h.history())
    assert r["error"]["kind"] == "client_tool_timeout"
    (tomb,) = await asyncio.to_thread(
        client.pending, session_id=h.session_id, include_resolved=True
    )
    assert tomb.status == "timed_out" and tomb.resolved_at is not None
    assert tomb.resolved_at >= p.deadline
    assert not parker.is_parked(h.workflow_id)


async def test_an_interrupt_reaches_a_parked_wait(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    h, _ = await _parked_wait(runtime, client, "asker", "wait for me")
    out = await asyncio.to_thread(client.interrupt, h.session_id)
    assert out.interrupted_sessions == [h.session_id]
    # The interrupt cancels the workflow and wakes the wait: the resume finds it cancelled
    # and leaves it (nothing runs), and the wait is parked no more.
    await until(lambda: not _parked(h.workflow_id), "the interrupted wait stayed parked")
    assert (await asyncio.to_thread(client.session, h.session_id)).status == "interrupted"
    assert await _workflow_status(client, h.workflow_id) == "CANCELLED"
    (tomb,) = await asyncio.to_thread(
        client.pending, session_id=h.session_id, include_resolved=True
    )
    assert tomb.status == "cancelled"


async def test_a_sub_agents_wait_stays_in_memory(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    # The parent holds its child's task: parking the child would strand the parent.
    h = await runtime.start("boss", "deep")
    (p,) = await _pending(client, h.session_id)
    await asyncio.sleep(1.0)
    assert not _parked(p.owner_session_id)
    assert any(isinstance(w, LoopAwareEvent) for w in _live_waiters(p.owner_session_id))
    await asyncio.to_thread(
        client.submit_tool_result, h.session_id, p.tool_call_id, result={"ok": True}
    )
    res = await asyncio.wait_for(h.result(), 20)
    assert res.status == "completed"
    assert json.dumps(res.output).count("got") >= 1


async def test_a_persistent_sessions_idle_inbox_parks_and_wakes(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    # pchat waits 3 s (idle_ttl) on its inbox between runs: parked at 0.3 s, a follow-up
    # resumes it, and the recorded timeout (not a fresh one) ends the parked workflow.
    h1 = await runtime.start("pchat", "one")
    assert (await asyncio.wait_for(h1.result(), 20)).output == "echo 0: one"
    await until(lambda: _parked(h1.workflow_id), "the idle inbox never parked")
    h2 = await runtime.send(h1.session_id, "two")
    assert h2.workflow_id == h1.workflow_id
    assert (await asyncio.wait_for(h2.result(), 20)).output == "echo 1: two"
    await until(lambda: _parked(h1.workflow_id), "the idle inbox never parked again")

    # The parked inbox reaches its idle TTL: the workflow ends.
    assert await _workflow_ends(client, h1.workflow_id) == "SUCCESS"
    assert not _parked(h1.workflow_id)
    assert (await h2.status()).status == "completed"


async def test_a_resume_claim_is_a_compare_and_swap_that_a_retry_repeats(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    from dbos_agents._dbos import parking as parking_compat

    parker = get_context().receiver
    h, p = await _parked_wait(runtime, client, "asker", "claim me")
    h2, p2 = await _parked_wait(runtime, client, "asker", "claim me too")
    entries = {}
    with parker._lock:  # take them from the parker: this test resumes them by hand
        for wf in (h.workflow_id, h2.workflow_id):
            entries[wf] = parker._parked.pop(wf)
    for wf, entry in entries.items():
        parking_compat.remove_waiter(wf, entry.topic, entry.wake)
    old, old2 = entries[h.workflow_id].owner_xid, entries[h2.workflow_id].owner_xid

    def claim(*claims: tuple[str, str | None, str]) -> set[str]:
        return set(parking_compat.claim_parked(list(claims)))

    # One statement claims many; a wrong parked token claims nothing.
    assert await asyncio.to_thread(
        claim, (h.workflow_id, old, "token-1"), (h2.workflow_id, "not-its-token", "token-9")
    ) == {h.workflow_id}
    # A retry of a claim whose commit was not acknowledged matches its own token...
    assert await asyncio.to_thread(claim, (h.workflow_id, old, "token-1")) == {h.workflow_id}
    # ...and nobody else's: the parked execution's token is gone.
    assert await asyncio.to_thread(claim, (h.workflow_id, old, "token-2")) == set()
    assert await asyncio.to_thread(claim, (h2.workflow_id, old2, "token-5")) == {h2.workflow_id}
    for sid, call in ((h.session_id, p), (h2.session_id, p2)):
        await asyncio.to_thread(
            client.submit_tool_result, sid, call.tool_call_id, result={"ok": True, "note": "h"}
        )
    # The claim reads back what the resume needs first (a retry of the claim, so each is
    # the row as claimed): DBOS's status of each workflow it took, as DBOS reads it; the
    # recorded operations, as the replay snapshot reads them; the topics with a message.
    claimed = await asyncio.to_thread(
        parking_compat.claim_parked,
        [(h.workflow_id, old, "token-1"), (h2.workflow_id, old2, "token-5")],
    )
    sys_db = compat._system_database()
    dbos_read = await asyncio.to_thread(
        sys_db.get_workflow_statuses, [h.workflow_id, h2.workflow_id]
    )
    assert [claimed[s["workflow_uuid"]].status for s in dbos_read] == dbos_read
    for wf, call in ((h.workflow_id, p), (h2.workflow_id, p2)):
        snapshot = await asyncio.to_thread(_dbos_replay._reader(sys_db), wf)
        assert claimed[wf].recorded == snapshot and len(snapshot) >= 1
        assert claimed[wf].unread == {call.tool_call_id}
    for wf, token in ((h.workflow_id, "token-1"), (h2.workflow_id, "token-5")):
        await asyncio.to_thread(parking_compat.execute_claimed, claimed[wf], token)
    for handle in (h, h2):
        res = await asyncio.wait_for(handle.result(), 20)
        assert res.output == 'asker got: {"note":"h","ok":true}'

    # Ended (the outcome event comes just before DBOS records the end): no claim takes it.
    assert await _workflow_ends(client, h.workflow_id) == "SUCCESS"
    assert await asyncio.to_thread(claim, (h.workflow_id, "token-1", "token-3")) == set()


async def test_a_resume_reads_its_recorded_operations_with_its_claim(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    """The replay of a resumed wait answers DBOS's per-operation checks from the records
    its claim read (``_dbos_replay.seed``), instead of a transaction per operation, and
    its ``recv`` knows from the claim that its message is there: neither the snapshot read
    nor the message check runs."""
    h, p = await _parked_wait(runtime, client, "asker", "ship it?")
    sys_db = compat._system_database()
    oo = sys_db.tables.operation_outputs
    with sys_db.engine.connect() as conn:
        recorded = conn.execute(
            sa.select(sa.func.max(oo.c.function_id)).where(oo.c.workflow_uuid == h.workflow_id)
        ).scalar_one()
    checked: list[int] = []
    reads: list[str] = []

    def seen(_c: object, _cur: object, statement: str, params: object, *_: object) -> None:
        if isinstance(params, dict) and params.get("wf") == h.workflow_id:
            if "LEFT OUTER JOIN" in statement and "operation_outputs" in statement:
                reads.append("snapshot")
            elif statement.startswith("SELECT 1 FROM") and "notifications" in statement:
                reads.append("message check")
        if (
            isinstance(params, dict)
            and params.get("workflow_uuid_1") == h.workflow_id
            and "function_id_1" in params
            and "operation_outputs.function_name" in statement  # DBOS's check of one operation
        ):
            checked.append(int(params["function_id_1"]))

    sa.event.listen(sys_db.engine, "before_cursor_execute", seen)
    try:
        out = await asyncio.to_thread(
            client.submit_tool_result, h.session_id, p.tool_call_id, result={"ok": True}
        )
        assert out.status == "accepted"
        assert (await asyncio.wait_for(h.result(), 20)).status == "completed"
        replayed, resumed_reads = list(checked), list(reads)
        # Controls: DBOS's own check (outside any workflow, so no snapshot), the snapshot
        # read and the message check are seen by the filter. Without them the test would
        # pass vacuously if a statement changed.
        await asyncio.to_thread(
            sys_db.check_operation_execution, h.workflow_id, recorded, "DBOS.sleep"
        )
        await asyncio.to_thread(_dbos_replay._reader(sys_db), h.workflow_id)
        await asyncio.to_thread(sys_db.recv_check, h.workflow_id, "t", threading.Event())
    finally:
        sa.event.remove(sys_db.engine, "before_cursor_execute", seen)
    assert recorded >= 2  # the turn's waits, the recv's sleep (v3: also the remaining step)
    assert [f for f in replayed if f <= recorded] == []
    assert checked[len(replayed) :] == [recorded], checked
    assert resumed_reads == [] and reads == ["snapshot", "message check"], reads


async def test_a_resumed_runs_new_turn_reads_nothing_first(
    runtime: AgentRuntime, client: AgentClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a parked resume, the run's next turn is new (its begin read the recorded
    turns): the model turn asks nobody whether it was recorded (``Ledger.turn_state``),
    as in an execution whose earlier step ran (it read one before: a round trip of ~1.6 ms
    in a wall-clock trace)."""
    from dbos_agents.loop.ledger import Ledger

    asked: list[int] = []
    turn_state = Ledger.turn_state

    async def counted(self: Ledger, spec: RunSpec, turn: int) -> Any:
        asked.append(turn)
        return await turn_state(self, spec, turn)

    monkeypatch.setattr(Ledger, "turn_state", counted)
    h, p = await _parked_wait(runtime, client, "asker", "new turn")
    out = await asyncio.to_thread(
        client.submit_tool_result, h.session_id, p.tool_call_id, result={"ok": True}
    )
    assert out.status == "accepted"
    assert (await asyncio.wait_for(h.result(), 20)).status == "completed"
    assert asked == []
    # Control: the runtime's ledger is the one counted (else the test passes vacuously).
    spec = _first_run(h, "new turn")
    await get_context().ledger.turn_state(spec, 2)
    assert asked == [2]


async def test_a_resumed_runs_begin_is_read_without_a_lock(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    """An execution resuming a parked wait reads its run's begin (``run_bounds.begin``):
    the same transcript the first execution began with, while another transaction holds
    the session's row lock that the begin's write path waits for. A run that had not begun
    takes the write path after all."""
    from dbos_agents.loop import execution, run_bounds

    h, _ = await _parked_wait(runtime, client, "asker", "read me back")
    spec = _first_run(h, "read me back")
    engine = get_context().ledger.ds.engine

    async def begin(resumed: bool, run: RunSpec = spec) -> run_bounds.BeginResult:
        execution.begin_execution(resumed=resumed)
        return await asyncio.wait_for(run_bounds.begin(engine, run), 5)

    read = await begin(resumed=True)
    # With it, the run's recorded turn, for the model turn to replay without a read; once.
    # The next turn is known to be new: nothing to read for it either.
    assert (execution.turn_is_new(1, 1), execution.turn_is_new(1, 2)) == (False, True)
    first_turn = execution.recorded_turn(1, 1)
    assert first_turn is not None and first_turn.response.tool_calls
    assert execution.recorded_turn(1, 1) is None
    assert read == await begin(resumed=False)  # the write path's replay: the same view
    assert execution.recorded_turn(1, 1) is None  # (which reads no turn ahead)
    assert not execution.turn_is_new(1, 2)  # nor knows which turns are new
    assert read.began is True
    assert read.messages[-1] == Message(role="user", content="read me back")
    with client.engine.connect() as conn, conn.begin():
        conn.execute(
            sa.text("SELECT 1 FROM dbos_agents.sessions WHERE id = :s FOR UPDATE"),
            {"s": h.session_id},
        )
        assert await begin(resumed=True) == read  # the write path would wait here
        with pytest.raises(TimeoutError):
            await begin(resumed=False)

    # The hint is wrong (the run had not begun): the write path begins it.
    sid = f"fresh-{h.session_id}"
    fresh = RunSpec(**{**spec, "session_id": sid, "root_session_id": sid})
    first = await begin(resumed=True, run=fresh)
    assert first.began is True and len(first.messages) == 1
    assert await begin(resumed=True, run=fresh) == first  # begun now: read back
