"""``runtime/_dbos_recv``: a woken ``recv`` consumes its message and records itself in one
statement, and checks for a message already there with one. The whole suite's waits (client tools, approvals, sub-agents, persistent inboxes,
interrupts, parked resumes, crash drills) run through it; these tests pin the cases a
round trip does not show: a retried consume, a stale owner, a missing message, and the
check's topics."""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any
from unittest import mock

import pytest
import sqlalchemy as sa
from dbos._error import DBOSWorkflowConflictIDError

from dbos_agents import AgentClient, AgentRuntime
from dbos_agents._dbos import internals as compat
from dbos_agents._dbos import recv as _dbos_recv

from .test_client_tools import _pending

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
TOPIC = "test.dbos_recv"


async def _finished_session(runtime: AgentRuntime, client: AgentClient) -> str:
    h = await runtime.start("asker", "ship it?")
    (p,) = await _pending(client, h.session_id)
    await asyncio.to_thread(
        client.submit_tool_result, h.session_id, p.tool_call_id, result={"ok": True}
    )
    assert (await h.result()).status == "completed"
    return h.workflow_id


def _rows(workflow_id: str) -> tuple[list[Any], list[Any]]:
    sys_db = compat._system_database()
    n, oo = sys_db.tables.notifications, sys_db.tables.operation_outputs
    with sys_db.engine.connect() as conn:
        notes = conn.execute(
            sa.select(n.c.message, n.c.consumed, n.c.consumed_by_function_id)
            .where(n.c.destination_uuid == workflow_id, n.c.topic == TOPIC)
            .order_by(n.c.created_at_epoch_ms)
        ).all()
        ops = conn.execute(
            sa.select(oo.c.function_id, oo.c.function_name, oo.c.output, oo.c.serialization)
            .where(oo.c.workflow_uuid == workflow_id, oo.c.function_id >= 900)
            .order_by(oo.c.function_id)
        ).all()
    return list(notes), list(ops)


def _consumer(owner: str | None) -> Any:
    """Our consume with this execution's token pinned to ``owner``."""
    with mock.patch("dbos._context.current_owner_xid", lambda _wf: owner):
        return _dbos_recv._consumer(compat._system_database())


def _owner(workflow_id: str) -> str | None:
    sys_db = compat._system_database()
    ws = sys_db.tables.workflow_status
    with sys_db.engine.connect() as conn:
        return conn.execute(
            sa.select(ws.c.owner_xid).where(ws.c.workflow_uuid == workflow_id)
        ).scalar()


async def test_the_runtime_consumes_with_one_statement(runtime: AgentRuntime) -> None:
    assert getattr(compat._system_database().recv_consume, "_dbos_agents", False)


async def test_a_consume_takes_the_oldest_message_once_and_a_retry_replays_it(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    wf = await _finished_session(runtime, client)
    for body in ("first", "second"):
        await asyncio.to_thread(client.dbos.send, wf, {"body": body}, TOPIC)
    consume = _consumer(_owner(wf))
    got = await asyncio.to_thread(consume, wf, 901, TOPIC, 123)
    assert got == {"body": "first"}
    # A retry of the same operation (its commit unacknowledged): the recorded message,
    # nothing more consumed.
    assert await asyncio.to_thread(consume, wf, 901, TOPIC, 123) == {"body": "first"}
    notes, ops = _rows(wf)
    assert [(n.consumed, n.consumed_by_function_id) for n in notes] == [(True, 901), (False, None)]
    assert [(o.function_id, o.function_name) for o in ops] == [(901, "DBOS.recv")]
    # The next operation takes the next message; with none left, a timeout records None.
    assert await asyncio.to_thread(consume, wf, 902, TOPIC, 123) == {"body": "second"}
    assert await asyncio.to_thread(consume, wf, 903, TOPIC, 123) is None
    _, ops = _rows(wf)
    assert [o.function_id for o in ops] == [901, 902, 903]
    none = ops[2]
    sys_db = compat._system_database()
    from dbos._serialization import deserialize_value

    assert none.output is not None  # DBOS's encoding of None, as its own consume records
    assert deserialize_value(none.output, none.serialization, sys_db.serializer) is None


async def test_a_stale_owner_consumes_nothing_and_records_nothing(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    wf = await _finished_session(runtime, client)
    await asyncio.to_thread(client.dbos.send, wf, {"body": "kept"}, TOPIC)
    stale = _consumer(f"stale-{uuid.uuid4()}")
    with pytest.raises(DBOSWorkflowConflictIDError):
        await asyncio.to_thread(stale, wf, 911, TOPIC, 123)
    notes, ops = _rows(wf)
    assert [n.consumed for n in notes] == [False] and ops == []
    # The owning execution (or no token: a call outside any workflow) still gets it.
    owner = _consumer(_owner(wf))
    assert await asyncio.to_thread(owner, wf, 911, TOPIC, 123) == {"body": "kept"}


async def test_a_wait_checks_for_its_message_with_one_statement(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    sys_db = compat._system_database()
    assert getattr(sys_db.recv_check, "_dbos_agents", False)
    wf = await _finished_session(runtime, client)

    async def check(topic: str | None) -> bool:
        event = threading.Event()
        await asyncio.to_thread(sys_db.recv_check, wf, topic, event)
        return event.is_set()

    assert not await check(TOPIC)
    await asyncio.to_thread(client.dbos.send, wf, {"body": "here"}, TOPIC)
    assert await check(TOPIC)
    assert not await check("another topic") and not await check(None)
    await asyncio.to_thread(client.dbos.send, wf, {"body": "untopical"}, None)
    assert await check(None)
    # Consumed, it is no longer there.
    assert await asyncio.to_thread(_consumer(_owner(wf)), wf, 921, TOPIC, 123) == {"body": "here"}
    assert not await check(TOPIC)
