"""The async client's reads on its event loop (``client/loop_reads.py``): a connection is
kept and handed out again, one the server dropped is replaced without the caller seeing it,
one a read left mid-protocol is never kept, and the reads (and a submit's common case) run
on the loop (no thread) and give what the sync client gives."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import psycopg
import pytest
import pytest_asyncio

from dbos_agents import AgentClient, AgentRuntime, AsyncAgentClient
from dbos_agents.delivery import ApprovalDelivery, ResultDelivery
from dbos_agents.errors import (
    AccessDeniedError,
    InvalidRequestError,
    InvalidResultError,
    SessionNotFoundError,
)
from dbos_agents.live.loop_reads import LIMIT, LoopReads
from dbos_agents.outcome import SessionInfo
from dbos_agents.store import pg

from .polling import until

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


async def _backend(conn: pg.Driver) -> int:
    cur = await conn.execute("SELECT pg_backend_pid()")
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])


@pytest_asyncio.fixture(loop_scope="session")
async def reads(integration_database_url: str) -> AsyncIterator[LoopReads]:
    own = LoopReads(integration_database_url, 5)
    yield own
    await own.aclose()


async def test_a_connection_is_kept_and_handed_out_again(reads: LoopReads) -> None:
    first = await reads.run(_backend)
    second = await reads.run(_backend)
    assert first == second
    assert reads.connects == 1


async def test_a_connection_the_server_dropped_is_replaced_unseen(
    reads: LoopReads, integration_database_url: str
) -> None:
    gone = await reads.run(_backend)
    with psycopg.connect(integration_database_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (gone,))
    await asyncio.sleep(0.2)
    now = await reads.run(_backend)
    assert now != gone
    assert reads.connects == 2


async def test_a_read_that_fails_mid_transaction_leaves_nothing_kept(reads: LoopReads) -> None:
    async def half(conn: pg.Driver) -> None:
        await conn.execute("BEGIN")
        raise ValueError("the caller's own error")

    with pytest.raises(ValueError, match="own error"):
        await reads.run(half)
    await reads.run(_backend)
    assert reads.connects == 2, "a connection left in a transaction was handed out again"


async def test_at_most_limit_reads_run_at_once(reads: LoopReads) -> None:
    running = peak = 0

    async def slow(conn: pg.Driver) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await conn.execute("SELECT pg_sleep(0.05)")
        running -= 1

    await asyncio.gather(*(reads.run(slow) for _ in range(3 * LIMIT)))
    assert peak == LIMIT
    assert reads.connects == LIMIT


async def test_full_reads_run_on_the_loop_and_match_the_sync_read(
    runtime: AgentRuntime, integration_database_url: str, client: AgentClient
) -> None:
    async with await AsyncAgentClient.connect(integration_database_url) as fresh:
        sid = await fresh.start("streamer", "loop reads: hello")
        await fresh.wait(sid, timeout=30)
        got = await fresh.read_events(sid)
        assert fresh.sync.loop_reads.connects == 1, "the read did not run on the loop"
        assert got == client.read_events(sid)
        assert [type(e).__name__ for e in got.events][-1] == "MessageEvent"


async def test_a_session_read_runs_on_the_loop(
    runtime: AgentRuntime, integration_database_url: str, client: AgentClient
) -> None:
    async with await AsyncAgentClient.connect(integration_database_url) as fresh:
        sid = await fresh.start("streamer", "loop reads: the session")
        await fresh.wait(sid, timeout=30)
        before = fresh.sync.loop_reads.connects
        got = await fresh.session(sid)
        assert fresh.sync.loop_reads.connects == before + (0 if before else 1)
        assert got == client.session(sid)
        scoped = fresh.for_identity("someone-else")
        with pytest.raises(AccessDeniedError):
            await scoped.session(sid)
        with pytest.raises(SessionNotFoundError):
            await fresh.session("ses_" + "0" * 32)


class _Counting(AgentClient):
    calls = 0

    def session(self, session_id: str) -> SessionInfo:
        type(self).calls += 1
        return super().session(session_id)


async def test_a_subclass_override_still_runs(
    runtime: AgentRuntime, integration_database_url: str, client: AgentClient
) -> None:
    sid = await asyncio.to_thread(client.start, "streamer", "loop reads: override")
    own = await asyncio.to_thread(_Counting, integration_database_url)
    async with AsyncAgentClient(own, owns_client=True) as wrapped:
        await wrapped.session(sid)
    assert _Counting.calls == 1


async def test_token_generation_runs_on_the_loop(
    runtime: AgentRuntime, integration_database_url: str, client: AgentClient
) -> None:
    sid = await asyncio.to_thread(client.start, "streamer", "loop reads: tokens")
    async with await AsyncAgentClient.connect(integration_database_url) as fresh:
        assert await fresh.token_generation(sid) == client.token_generation(sid)
        assert fresh.sync.loop_reads.connects == 1, "the read did not run on the loop"
        bumped = await asyncio.to_thread(client.revoke_tokens, sid)
        assert await fresh.token_generation(sid) == bumped
        with pytest.raises(AccessDeniedError):
            await fresh.for_identity("someone-else").token_generation(sid)
        with pytest.raises(SessionNotFoundError):
            await fresh.token_generation("ses_" + "0" * 32)


async def test_a_submit_runs_on_the_loop_and_decides_as_the_sync_one(
    runtime: AgentRuntime, integration_database_url: str, client: AgentClient
) -> None:
    sid = await asyncio.to_thread(client.start, "asker", "loop reads: submit", user_id="ann")
    (p,) = await until(lambda: client.pending(session_id=sid), f"no pending call for {sid}")
    async with await AsyncAgentClient.connect(integration_database_url) as fresh:
        refused = [
            (
                fresh.deliver(sid, p.tool_call_id, ResultDelivery(result={"ok": "maybe"})),
                InvalidResultError,
            ),
            (
                fresh.deliver(sid, p.tool_call_id, ApprovalDelivery(approved=True)),
                InvalidRequestError,
            ),
            (
                fresh.for_identity("bob").deliver(
                    sid, p.tool_call_id, ResultDelivery(result={"ok": True})
                ),
                AccessDeniedError,
            ),
        ]
        for call, error in refused:
            with pytest.raises(error):
                await call
        (still,) = await asyncio.to_thread(client.pending, session_id=sid)
        assert still.status == "waiting", "a refused submit changed the wait"
        assert fresh.sync.loop_reads.connects >= 1, "the submit's read did not run on the loop"

        out = await fresh.deliver(sid, p.tool_call_id, ResultDelivery(result={"ok": True}))
        assert out.status == "accepted"
        again = await fresh.deliver(sid, p.tool_call_id, ResultDelivery(result={"ok": True}))
        assert again.status == "already_completed"
        unknown = await fresh.deliver(sid, "call_nobody", ResultDelivery(result={"ok": True}))
        assert (unknown.status, unknown.reason) == ("unknown_tool_call", "no_pending_call")
    assert (await asyncio.to_thread(client.wait, sid, timeout=60)).status == "completed"


async def test_reads_on_the_loop_run_on_the_kept_connections(
    integration_database_url: str,
) -> None:
    async with await AsyncAgentClient.connect(integration_database_url) as fresh:
        first = await fresh._on_loop(_backend)
        assert await fresh._on_loop(_backend) == first
        assert fresh.sync.loop_reads.connects == 1
        rows = await fresh._on_loop(lambda d: pg.fetch(d, ("SELECT :x::int AS x", {"x": 7})))
        assert [r.x for r in rows] == [7]
        with pytest.raises(psycopg.errors.UndefinedTable):  # not an outage: raised as it is
            await fresh._on_loop(lambda d: pg.fetch(d, ("SELECT * FROM no_such_table", {})))


async def test_a_script_of_reads_gives_each_statements_rows_in_one_snapshot(
    reads: LoopReads,
) -> None:
    """``pg.script_rows``, what a live stream's full read sends: one round trip, one result
    per statement (none for one that returns none), one snapshot after ``SET
    TRANSACTION``, and a failing statement leaves the connection as it found it."""

    async def script(conn: pg.Driver) -> list[list[object]]:
        return await pg.script_rows(
            conn,
            [
                ("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", {}),
                ("SELECT :s::text AS s, :n::int AS n", {"s": "it's 100% text", "n": 3}),
                ("SELECT g FROM generate_series(1, :n) AS g WHERE false", {"n": 2}),
                ("SELECT current_setting('transaction_isolation') AS iso", {}),
                ("SELECT txid_current() AS a", {}),
                ("SELECT txid_current() AS b", {}),
            ],
        )

    rows = await reads.run(script)
    assert [[tuple(r) for r in rs] for rs in rows[:4]] == [
        [],
        [("it's 100% text", 3)],
        [],
        [("repeatable read",)],
    ]
    assert rows[4][0].a == rows[5][0].b, "the statements ran in more than one transaction"

    async def failing(conn: pg.Driver) -> bool:
        with pytest.raises(psycopg.errors.DivisionByZero):
            await pg.script_rows(conn, [("SELECT 1", {}), ("SELECT 1 / 0", {})])
        return pg.usable(conn)

    assert await reads.run(failing), "a failed script left its connection in a transaction"
    assert reads.connects == 1
