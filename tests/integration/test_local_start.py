"""A run the worker starts itself is claimed by the transaction that enqueues it
(``runtime/_dbos_starts``): DBOS's row says so, the status the claim read is DBOS's own,
and where the queue must claim (a worker limit, a drain) the start goes through it."""

from __future__ import annotations

import asyncio

import pytest

from dbos_agents import AgentClient, AgentRuntime
from dbos_agents._dbos import internals as compat
from dbos_agents._dbos import starts as _dbos_starts
from dbos_agents.ids import agent_queue
from dbos_agents.loop import drain

from .test_client_tools import _pending

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


async def test_a_local_start_is_claimed_as_it_is_enqueued(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    from dbos._utils import GlobalParams

    claimed: list[dict[str, object]] = []
    original = _dbos_starts.LocalStart.execute

    def execute(self: _dbos_starts.LocalStart) -> None:
        assert self.status is not None, "the enqueuing transaction claimed nothing"
        claimed.append(dict(self.status))
        original(self)

    _dbos_starts.LocalStart.execute = execute  # type: ignore[method-assign]
    try:
        h = await runtime.start("asker", "ship it?")
    finally:
        _dbos_starts.LocalStart.execute = original  # type: ignore[method-assign]
    (call,) = await _pending(client, h.session_id)  # it runs, and waits on its client tool
    (status,) = claimed
    sys_db = compat._system_database()
    (dbos_read,) = await asyncio.to_thread(sys_db.get_workflow_statuses, [h.workflow_id])
    # The claim read DBOS's status of the workflow as DBOS reads it (only the time of the
    # last update moved since: the run began).
    assert {k: v for k, v in status.items() if k != "updated_at"} == {
        k: v for k, v in dbos_read.items() if k != "updated_at"
    }
    assert status["status"] == "PENDING" and status["executor_id"] == GlobalParams.executor_id
    assert status["recovery_attempts"] == 1 and status["app_version"] == GlobalParams.app_version
    await asyncio.to_thread(
        client.submit_tool_result, h.session_id, call.tool_call_id, result={"ok": True}
    )
    assert (await asyncio.wait_for(h.result(), 20)).status == "completed"


async def test_the_queue_claims_under_a_worker_limit_or_a_drain(runtime: AgentRuntime) -> None:
    name = agent_queue(runtime.settings.queue_name, "support")
    assert runtime._local_claim("support") is not None
    drain.begin_drain()
    try:
        assert runtime._local_claim("support") is None
    finally:
        drain.end_drain()
    sys_db = compat._system_database()
    queue = compat._queue_config(sys_db, name)
    queue._worker_concurrency, kept = 5, queue._worker_concurrency
    try:
        assert _dbos_starts.local_start(name) is None
        assert compat.dequeue_now(name) == 0
    finally:
        queue._worker_concurrency = kept


async def test_the_result_of_a_local_start_is_handed_over_without_the_database(
    runtime: AgentRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run this start claimed hands its outcome over in process: ``result()`` does
    not also read the run's row and wait for its NOTIFY."""
    from dbos_agents.worker import handle as runtime_module

    asked: list[str] = []
    read = runtime_module.runs.read_stmt

    def counted(session_id: str, run_seq: int) -> tuple[str, dict[str, object]]:
        asked.append(session_id)
        return read(session_id, run_seq)

    monkeypatch.setattr(runtime_module.runs, "read_stmt", counted)
    out = await asyncio.wait_for((await runtime.start("chat", "hello")).result(), 20)
    assert out.status == "completed"
    assert asked == []
    # A handle on the same session from elsewhere (not this start) asks the database.
    again = runtime.session(out.session_id)
    assert (await asyncio.wait_for(again.result(), 20)).status == "completed"
    assert asked != []
