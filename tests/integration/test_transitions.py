"""Every state transition of a session, a tool call and a pending call, at the store level.

Real Postgres, no DBOS launch, no worker: rows are written with the statements and
functions the workflow and the clients run (``run_bounds``, the store's ``*_stmt``);
DBOS's system tables are touched only through a ``DBOSClient`` (workflows enqueued that no
worker runs). Every test works on ids of its own.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio
import sqlalchemy as sa
from sqlalchemy.ext import asyncio as sa_async

from dbos_agents import AgentClient
from dbos_agents.client.submit import interrupt, submit
from dbos_agents.delivery import ResultDelivery
from dbos_agents.errors import InterruptFailedError, SessionNotFoundError
from dbos_agents.loop import run_bounds
from dbos_agents.messages import Message, Usage
from dbos_agents.outcome import RunOutcome, RunSpec
from dbos_agents.results import ToolResult
from dbos_agents.store import calls, pending, pg, runs, sessions, transcript
from dbos_agents.store.db import sqlalchemy_url

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
S = "dbos_agents"
TERMINAL = ("completed", "failed", "max_turns", "budget_exhausted")
OPEN_WAIT = ("waiting", "submitted")


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def spec(sid: str, *, root: str | None = None, parent: str | None = None, run: int = 1) -> RunSpec:
    return RunSpec(
        session_id=sid, root_session_id=root or sid, parent_session_id=parent, agent="a",
        run_seq=run, message="hi", user_id=None, tenant_id=None,
    )  # fmt: skip


def result(cid: str, ok: bool = True, value: str = "v") -> ToolResult:
    if ok:
        return ToolResult.success(cid, "t", value)
    return ToolResult.failure(cid, "t", "tool-error", value)


def outcome(sid: str, status: Any) -> RunOutcome:
    return RunOutcome(
        session_id=sid, run_seq=1, status=status, output="out", error="err", usage=Usage()
    )


def stored(r: ToolResult) -> dict[str, Any]:
    """A result as its ledger row holds it."""
    return r.model_dump(mode="json")


@dataclass
class Env:
    """The database of this module: a sync engine and DBOS client (out-of-workflow callers)
    and an async engine (the workflow's datasource)."""

    client: AgentClient
    aengine: sa_async.AsyncEngine

    def tx(self) -> Any:
        """An AsyncSession in a transaction committed on exit."""
        return sa_async.async_sessionmaker(self.aengine).begin()

    async def run(self, *stmts: pg.Stmt) -> list[int]:
        """Statements in one transaction, as the workflow's scripts run them; each one's
        row count."""
        async with self.tx() as db:
            return [(await pg.execute(db, stmt)).rowcount for stmt in stmts]

    def sql(self, stmt: str, **params: Any) -> Any:
        with self.client.engine.begin() as conn:
            r = conn.execute(sa.text(stmt), params)
            return r.all() if r.returns_rows else None

    def one(self, table: str, where: str, **params: Any) -> Any:
        return self.sql(f"SELECT * FROM {table} WHERE {where}", **params)[0]

    def session(self, sid: str) -> Any:
        return self.one(f"{S}.sessions", "id = :s", s=sid)

    def call(self, sid: str, cid: str) -> Any:
        return self.one(f"{S}.tool_calls", "session_id = :s AND tool_call_id = :c", s=sid, c=cid)

    def wait(self, root: str, cid: str) -> Any:
        where = "root_session_id = :r AND tool_call_id = :c"
        return self.one(f"{S}.pending_calls", where, r=root, c=cid)

    def wf_status(self, wf: str) -> str:
        return str(self.one("dbos.workflow_status", "workflow_uuid = :w", w=wf).status)

    def new_session(self, status: str = "queued") -> str:
        sid = uid("s")
        with self.client.engine.begin() as conn:
            sessions.insert_queued(conn, sid, "a", None, None)
        self.sql(f"UPDATE {S}.sessions SET status = :st WHERE id = :s", st=status, s=sid)
        return sid

    def enqueue(self, wf: str) -> str:
        """A workflow that exists in DBOS (ENQUEUED) but that no worker will ever run."""
        self.client.dbos.enqueue({"queue_name": "q", "workflow_name": "nobody", "workflow_id": wf})
        return wf

    async def new_calls(self, sid: str, *cids: str) -> None:
        rows = [calls.Requested(c, "t", "server", "{}", c, False) for c in cids]
        await self.run(*calls.insert_requested_stmts(sid, 1, 1, rows))

    async def new_wait(self, root: str, wf: str = "wf", owner: str | None = None) -> str:
        cid = uid("c")
        await self.run(
            pending.open_stmt(
                root_session_id=root, tool_call_id=cid, owner_session_id=owner or root,
                owner_workflow_id=wf, kind="client", tool="t", arguments="{}",
                deadline=time.time() + 60, output_schema=None, user_id=None, tenant_id=None,
            )
        )  # fmt: skip
        return cid

    async def waits_in_every_status(self, root: str) -> dict[str, str]:
        w = {st: await self.new_wait(root) for st in ("waiting", "submitted", "timed_out")}
        w["resolved"], w["closed"] = await self.new_wait(root), await self.new_wait(root)
        with self.client.engine.begin() as conn:
            pending.mark_submitted(conn, root, w["submitted"], {"kind": "result", "result": 1})
            pending.close_one(conn, root, w["closed"], "run_ended")
        async with self.tx() as db:
            await pending.settle_timeout(db, root, w["timed_out"])
        await self.run(pending.resolve_stmt(root, w["resolved"]))
        return w

    def answer(self, root: str, cid: str, value: Any = 1) -> Any:
        delivery = ResultDelivery(result=value)
        c = self.client
        return submit(
            c.engine,
            c.dbos,
            session_id=root,
            tool_call_id=cid,
            delivery=delivery,
            schema="dbos",
            scope=None,
        )


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def env(fresh_database_url: str) -> AsyncIterator[Env]:
    client = AgentClient(fresh_database_url)  # prepares the database: DBOS's tables and ours
    aengine = sa_async.create_async_engine(sqlalchemy_url(fresh_database_url))
    yield Env(client, aengine)
    await aengine.dispose()
    client.close()


# --- sessions -------------------------------------------------------------------------------


async def test_session_queued_to_running_by_begin_and_again_on_recovery(env: Env) -> None:
    sid = env.new_session()
    for wf in ("wf-1", "wf-1-recovered"):
        assert await env.run(sessions.begin_stmt(spec(sid), wf)) == [1]
        assert (env.session(sid).status, env.session(sid).workflow_id) == ("running", wf)


@pytest.mark.parametrize("parent", ["running", "interrupted"])
async def test_subagent_row_created_by_begin_running_unless_parent_interrupted(
    env: Env, parent: str
) -> None:
    root, child = env.new_session(parent), uid("child")
    begun = await run_bounds.begin(env.aengine, spec(child, root=root, parent=root))
    r = env.session(child)
    assert (begun.began, r.status) == (
        (True, "running") if parent == "running" else (False, parent)
    )
    assert (r.parent_session_id, r.root_session_id) == (root, root)


@pytest.mark.parametrize("case", ["interrupted", "stale_run_seq"])
@pytest.mark.parametrize("op", ["begin", "finish"])
async def test_fenced_off_run_changes_nothing(env: Env, op: str, case: str) -> None:
    sid = env.new_session("interrupted" if case == "interrupted" else "running")
    run = 2 if case == "stale_run_seq" else 1  # a newer run owns the row
    env.sql(f"UPDATE {S}.sessions SET run_seq = :r WHERE id = :s", r=run, s=sid)
    before = env.session(sid)
    if op == "begin":
        assert (await run_bounds.begin(env.aengine, spec(sid))).began is False
    else:
        await run_bounds.end(env.aengine, spec(sid), outcome(sid, "completed"), True)
    assert env.session(sid) == before


@pytest.mark.parametrize("status", TERMINAL)
async def test_session_running_to_terminal_by_finish(env: Env, status: str) -> None:
    sid = env.new_session("running")
    await run_bounds.end(env.aengine, spec(sid), outcome(sid, status), open_inbox=True)
    r = env.session(sid)
    assert (r.status, r.final_output, r.error, r.inbox_open) == (status, "out", "err", True)
    assert runs.get(env.client.engine, sid, 1) == outcome(sid, status)


async def test_interrupt_tree_marks_only_busy_sessions(env: Env) -> None:
    root = env.new_session("running")
    kids = {st: uid(st) for st in ("queued", "running", *TERMINAL, "interrupted")}
    for st, kid in kids.items():
        env.sql(f"INSERT INTO {S}.sessions (id, root_session_id, parent_session_id, agent,"
                " status, workflow_id, inbox_open) VALUES (:k, :r, :r, 'a', :st, :k, true)",
                k=kid, r=root, st=st)  # fmt: skip
    with env.client.engine.begin() as conn:
        busy = sessions.interrupt_tree(conn, root)
    assert {b.id for b in busy} == {root, kids["queued"], kids["running"]}
    for st, kid in kids.items():
        r = env.session(kid)
        was_busy = st in sessions.BUSY
        assert (r.status, r.inbox_open) == (("interrupted", False) if was_busy else (st, True))


@pytest.mark.parametrize("status", [*TERMINAL, "interrupted"])
async def test_session_terminal_to_queued_by_requeue(env: Env, status: str) -> None:
    sid = env.new_session(status)
    with env.client.engine.begin() as conn:
        sessions.requeue(conn, sid, sessions.lock(conn, sid).run_seq + 1, "wf-2")
    r = env.session(sid)
    assert (r.status, r.run_seq, r.workflow_id) == ("queued", 2, "wf-2")


async def test_close_inbox_only_while_run_seq_unchanged(env: Env) -> None:
    sid = env.new_session("running")
    await run_bounds.end(env.aengine, spec(sid), outcome(sid, "completed"), open_inbox=True)
    env.sql(f"UPDATE {S}.sessions SET run_seq = 2 WHERE id = :s", s=sid)  # a message came in
    async with env.tx() as db:
        assert await sessions.close_inbox(db, sid, 1) is False
    assert env.session(sid).inbox_open is True
    async with env.tx() as db:
        assert await sessions.close_inbox(db, sid, 2) is True
    assert env.session(sid).inbox_open is False


# --- tool calls -----------------------------------------------------------------------------


async def test_a_call_whose_wait_opens_with_its_turn_is_inserted_dispatched(env: Env) -> None:
    sid = env.new_session("running")
    rows = [calls.Requested(c, "t", "client", "{}", c, False) for c in ("a", "b")]
    await env.run(*calls.insert_requested_stmts(sid, 1, 1, rows, dispatched={"a"}))
    a, b = env.call(sid, "a"), env.call(sid, "b")
    assert (a.status, a.attempts, b.status, b.attempts) == ("dispatched", 1, "requested", 0)
    assert a.dispatched_at is not None and b.dispatched_at is None


async def test_call_requested_to_dispatched_by_attempt_counted_per_token(env: Env) -> None:
    sid = env.new_session("running")
    await env.new_calls(sid, "c")
    async with calls.attempt(env.aengine, sid, "c", "tok-1", exclusive=True) as a:
        assert (a.number, a.prior_status, a.recorded) == (1, "requested", None)
    assert env.call(sid, "c").status == "dispatched"
    # The same execution retrying its mark (a lost commit ack) is not an earlier attempt.
    async with calls.attempt(env.aengine, sid, "c", "tok-1", exclusive=True) as a:
        assert (a.number, a.prior_status) == (1, "requested")
    async with calls.attempt(env.aengine, sid, "c", "tok-2", exclusive=True) as a:
        assert (a.number, a.prior_status) == (2, "dispatched")
    r = env.call(sid, "c")
    assert (r.status, r.attempts, r.attempt_token) == ("dispatched", 2, "tok-2")


@pytest.mark.parametrize("status", ["interrupted", "completed", "queued"])
async def test_a_fenced_attempt_of_a_run_that_is_not_running_marks_nothing(
    env: Env, status: str
) -> None:
    """``session.v2``'s check in place of DBOS's cancellation check at a step's start: the
    mark of a run that no longer runs (or of an older run) changes nothing."""
    sid = env.new_session(status)
    await env.new_calls(sid, "c")
    async with calls.attempt(env.aengine, sid, "c", "t1", exclusive=True, run_seq=1) as a:
        assert a.fenced
    env.sql(f"UPDATE {S}.sessions SET status = 'running', run_seq = 2 WHERE id = :s", s=sid)
    async with calls.attempt(env.aengine, sid, "c", "t2", exclusive=True, run_seq=1) as a:
        assert a.fenced  # an older run's call
    r = env.call(sid, "c")
    assert (r.status, r.attempts) == ("requested", 0)
    async with calls.attempt(env.aengine, sid, "c", "t3", exclusive=True, run_seq=2) as a:
        assert not a.fenced and (a.number, a.prior_status) == (1, "requested")
    assert env.call(sid, "c").status == "dispatched"


@pytest.mark.parametrize("ok", [True, False])
async def test_call_dispatched_to_settled_by_record_first_result_wins(env: Env, ok: bool) -> None:
    sid, first = env.new_session("running"), result("c", ok, "first")
    await env.new_calls(sid, "c")
    async with calls.attempt(env.aengine, sid, "c", "t1", exclusive=True) as a:
        assert await a.record(first) == first
        assert await a.record(result("c", ok, "second")) == first
    r = env.call(sid, "c")
    assert (r.status, r.result, r.error_kind) == (
        ("completed", stored(first), None) if ok else ("failed", stored(first), "tool-error"))  # fmt: skip
    async with calls.attempt(env.aengine, sid, "c", "t2", exclusive=False) as a:
        assert (a.recorded, a.prior_status, a.number) == (first, r.status, 2)
        assert await a.record(result("c", not ok, "third")) == first
    assert (env.call(sid, "c").status, env.call(sid, "c").result) == (r.status, stored(first))


@pytest.mark.parametrize("ok", [True, False])
async def test_call_requested_to_settled_by_settle(env: Env, ok: bool) -> None:
    sid = env.new_session("running")
    await env.new_calls(sid, "c")
    await env.run(calls.settle_stmt(sid, result("c", ok)))
    r = env.call(sid, "c")
    expected = ("completed" if ok else "failed", stored(result("c", ok)), 0)
    assert (r.status, r.result, r.attempts) == expected


@pytest.mark.parametrize("late_ok", [True, False])
async def test_settle_keeps_the_recorded_result_and_its_status(env: Env, late_ok: bool) -> None:
    sid = env.new_session("running")
    await env.new_calls(sid, "c")
    async with calls.attempt(env.aengine, sid, "c", "t1", exclusive=True) as a:
        await a.record(result("c", True, "recorded"))
    await env.run(calls.settle_stmt(sid, result("c", late_ok, "settled")))
    r = env.call(sid, "c")
    assert (r.status, r.result) == ("completed", stored(result("c", True, "recorded")))


async def test_unanswered_lists_calls_without_tool_message(env: Env) -> None:
    sid = env.new_session("running")
    await env.new_calls(sid, "answered", "requested", "recorded")
    async with calls.attempt(env.aengine, sid, "recorded", "t1", exclusive=True) as a:
        await a.record(result("recorded"))
    msg = Message(role="tool", content="v", tool_call_id="answered", name="t")
    await env.run(
        calls.settle_stmt(sid, result("answered")), transcript.append_stmt(spec(sid), 1, msg)
    )
    async with env.tx() as db:
        found = (await pg.execute(db, calls.unanswered_stmt(sid))).all()
        rows = {r.tool_call_id: (r.status, r.result) for r in found}
    assert rows == {
        "requested": ("requested", None),
        "recorded": ("completed", stored(result("recorded"))),
    }


async def _until_someone_waits_for_an_advisory_lock(env: Env) -> None:
    q = "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database"
    q += " WHERE d.datname = current_database() AND l.locktype = 'advisory' AND NOT l.granted"
    for _ in range(1000):
        async with env.aengine.connect() as conn:
            if (await conn.execute(sa.text(q))).scalar_one():
                return
        await asyncio.sleep(0.01)
    raise AssertionError("the second attempt never waited on the advisory lock")


async def test_exclusive_attempt_waits_for_the_open_one_a_non_exclusive_does_not(
    env: Env,
) -> None:
    sid, events = env.new_session("running"), []
    await env.new_calls(sid, "c")

    async def attempt(token: str, exclusive: bool) -> int:
        async with calls.attempt(env.aengine, sid, "c", token, exclusive=exclusive) as a:
            events.append(f"{token} entered")
            return a.number

    async with calls.attempt(env.aengine, sid, "c", "t1", exclusive=True):
        events.append("t1 entered")
        assert await asyncio.wait_for(attempt("t2", exclusive=False), 30) == 2  # not blocked
        task = asyncio.create_task(attempt("t3", exclusive=True))
        await _until_someone_waits_for_an_advisory_lock(env)  # t3 is blocked in Postgres
        events.append("t1 exits")
    assert await asyncio.wait_for(task, 30) == 3
    assert events == ["t1 entered", "t2 entered", "t1 exits", "t3 entered"]


async def test_lock_key_is_stable_and_per_call() -> None:
    k = calls.lock_key("s", "c")
    assert k == calls.lock_key("s", "c") and -(2**63) <= k < 2**63
    others = {calls.lock_key("s", "d"), calls.lock_key("t", "c"), calls.lock_key("sc", "")}
    assert k not in others and len(others) == 3


# --- pending calls --------------------------------------------------------------------------


async def test_wait_waiting_to_submitted_by_submit_to_resolved(env: Env) -> None:
    root, wf = env.new_session("running"), env.enqueue(uid("wf"))
    cid = await env.new_wait(root, wf)
    sent = "SELECT count(*) FROM dbos.notifications WHERE destination_uuid = :w AND topic = :c"
    assert env.answer(root, cid, {"x": 1}).status == "accepted"
    r = env.wait(root, cid)
    assert (r.status, r.submission) == ("submitted", {"kind": "result", "result": {"x": 1}})
    assert env.sql(sent, w=wf, c=cid)[0][0] == 1
    assert env.answer(root, cid).status == "already_completed"
    await env.run(pending.resolve_stmt(root, cid))
    assert env.wait(root, cid).status == "resolved" and env.wait(root, cid).resolved_at
    assert env.answer(root, cid).status == "already_completed"
    assert env.sql(sent, w=wf, c=cid)[0][0] == 1  # delivered once


async def test_wait_waiting_to_timed_out_by_settle_timeout_only_from_waiting(env: Env) -> None:
    root = env.new_session("running")
    w = await env.waits_in_every_status(root)
    other = env.new_session("running")
    cancelled = await env.new_wait(other)
    with env.client.engine.begin() as conn:
        pending.cancel_tree(conn, other)
    async with env.tx() as db:
        for st, cid in w.items():
            expected = "timed_out" if st == "waiting" else st
            assert await pending.settle_timeout(db, root, cid) == expected
        assert await pending.settle_timeout(db, other, cancelled) == "cancelled"
    assert env.wait(root, w["waiting"]).resolved_at is not None


@pytest.mark.parametrize("op", ["resolve", "cancel_tree", "close_open"])
async def test_open_waits_settled_by_op_others_untouched(env: Env, op: str) -> None:
    root = env.new_session("running")
    w = await env.waits_in_every_status(root)
    if op == "cancel_tree":
        with env.client.engine.begin() as conn:
            got = {r.tool_call_id for r in pending.cancel_tree(conn, root)}
        assert got == {w["waiting"], w["submitted"]}
    if op == "close_open":
        assert await env.run(pending.close_open_stmt(root, "run_completed", 1)) == [2]
    for cid in w.values() if op == "resolve" else ():
        await env.run(pending.resolve_stmt(root, cid))
    to = {"resolve": "resolved", "cancel_tree": "cancelled", "close_open": "closed"}[op]
    why = "run_completed" if op == "close_open" else None
    for st, cid in w.items():
        r, was = env.wait(root, cid), "run_ended" if st == "closed" else None
        assert (r.status, r.close_reason) == ((to, why) if st in OPEN_WAIT else (st, was))


async def test_submit_to_cancelled_or_closed_wait_is_unknown(env: Env) -> None:
    root = env.new_session("running")
    cancelled, closed = await env.new_wait(root), await env.new_wait(root)
    with env.client.engine.begin() as conn:
        pending.close_one(conn, root, closed, "run_ended")
        pending.cancel_tree(conn, root)
    for cid, reason in ((cancelled, "interrupted"), (closed, "run_ended")):
        assert (env.answer(root, cid).status, env.answer(root, cid).reason) == (
            "unknown_tool_call", reason)  # fmt: skip
        assert env.wait(root, cid).submission is None
    assert env.answer(root, "nope").reason == "no_pending_call"
    assert env.answer(uid("nobody"), "nope").reason == "no_session"


async def test_submit_to_wait_of_cancelled_workflow_closes_it(env: Env) -> None:
    root, wf = env.new_session("running"), env.enqueue(uid("wf"))
    cid = await env.new_wait(root, wf)
    env.client.dbos.cancel_workflow(wf)
    out = env.answer(root, cid)
    assert (out.status, out.reason) == ("unknown_tool_call", "run_ended")
    r = env.wait(root, cid)
    assert (r.status, r.close_reason, r.submission) == ("closed", "run_ended", None)


async def test_late_answer_after_timeout_is_stored_once(env: Env) -> None:
    root = env.new_session("running")
    cid = await env.new_wait(root)
    async with env.tx() as db:
        await pending.settle_timeout(db, root, cid)
    assert env.answer(root, cid, "late").status == "late_answer_after_timeout"
    assert env.answer(root, cid, "later").status == "late_answer_after_timeout"
    r = env.wait(root, cid)
    assert (r.status, r.late_submission) == ("timed_out", {"kind": "result", "result": "late"})


async def test_list_pending_hides_waits_of_ended_workflows(env: Env) -> None:
    root, live, dead = env.new_session("running"), env.enqueue(uid("wf")), env.enqueue(uid("wf"))
    live_cid, dead_cid = await env.new_wait(root, live), await env.new_wait(root, dead)
    env.client.dbos.cancel_workflow(dead)

    def listed(**kw: Any) -> set[str]:
        stmt = pending.list_pending_stmt(session_id=root, system_schema="dbos", **kw)
        rows = pending.list_pending(env.client.engine, stmt)
        return {p.tool_call_id for p in rows}

    assert listed() == {live_cid}
    assert listed(include_resolved=True) == {live_cid, dead_cid}


async def test_reap_deletes_only_old_settled_waits(env: Env) -> None:
    root = env.new_session("running")
    w = await env.waits_in_every_status(root)
    with env.client.engine.begin() as conn:
        pending.cancel_tree(conn, root)  # waiting and submitted: now every status is settled
    still_open, young = await env.new_wait(root), await env.new_wait(root)
    await env.run(pending.resolve_stmt(root, young))
    env.sql(f"UPDATE {S}.pending_calls SET resolved_at = resolved_at - interval '2 hours',"
            " created_at = now() - interval '2 hours' WHERE root_session_id = :r"
            " AND tool_call_id <> :y", r=root, y=young)  # fmt: skip
    assert env.wait(root, still_open).resolved_at is None  # created 2 hours ago, still open
    assert pending.reap(env.client.engine, 3600) == len(w)
    left = env.sql(f"SELECT tool_call_id FROM {S}.pending_calls WHERE root_session_id = :r", r=root)
    assert {r[0] for r in left} == {young, still_open}


# --- interrupt ------------------------------------------------------------------------------


async def busy_tree(env: Env) -> dict[str, str]:
    """A running root with a running sub-agent (both waiting), a finished sub-agent and an
    only-enqueued grandchild workflow; every workflow ENQUEUED in DBOS."""
    t = {"root": env.new_session(), "child": uid("child"), "done": uid("done")}
    t["root_wf"] = env.enqueue(uid("wf"))
    t["child_wf"] = env.enqueue(f"{t['root_wf']}::sub::1")
    t["grand_wf"] = env.enqueue(f"{t['child_wf']}::sub::1")
    t["other_wf"] = env.enqueue(f"{t['root_wf']}x::sub::1")  # shares a prefix only
    child, done = (spec(t[k], root=t["root"], parent=t["root"]) for k in ("child", "done"))
    began = await env.run(
        sessions.begin_stmt(spec(t["root"]), t["root_wf"]),
        sessions.begin_stmt(child, t["child_wf"]),
        sessions.begin_stmt(done, "done-wf"),
        sessions.finish_stmt(done, "completed", "x", None, False),
    )
    assert began == [1, 1, 1, 1]
    t["root_wait"] = await env.new_wait(t["root"], t["root_wf"])
    t["child_wait"] = await env.new_wait(t["root"], t["child_wf"], owner=t["child"])
    return t


def state(env: Env, t: dict[str, str]) -> tuple[Any, ...]:
    """Session statuses, wait statuses, workflow statuses and interrupt messages sent."""
    notes = "SELECT count(*) FROM dbos.notifications WHERE topic IN (:a, :b)"
    return (
        [env.session(t[k]).status for k in ("root", "child", "done")],
        [env.wait(t["root"], t[k]).status for k in ("root_wait", "child_wait")],
        [env.wf_status(t[k]) for k in ("root_wf", "child_wf", "grand_wf", "other_wf")],
        env.sql(notes, a=t["root_wait"], b=t["child_wait"])[0][0],
    )


async def test_interrupt_marks_sessions_cancels_waits_and_workflows(env: Env) -> None:
    t = await busy_tree(env)
    out = interrupt(env.client.engine, env.client.dbos, t["child"], None)  # any session of the tree
    assert set(out.interrupted_sessions) == {t["root"], t["child"]}
    assert set(out.cancelled_calls) == {t["root_wait"], t["child_wait"]}
    assert state(env, t) == (
        ["interrupted", "interrupted", "completed"],
        ["cancelled", "cancelled"],
        ["CANCELLED", "CANCELLED", "CANCELLED", "ENQUEUED"],
        2,  # the blocked waits are woken with an interrupt delivery
    )
    again = interrupt(env.client.engine, env.client.dbos, t["root"], None)
    assert (again.interrupted_sessions, again.cancelled_calls) == ([], [])
    with pytest.raises(SessionNotFoundError):
        interrupt(env.client.engine, env.client.dbos, uid("nobody"), None)


async def test_interrupt_that_fails_midway_changes_nothing(env: Env) -> None:
    t = await busy_tree(env)
    before = state(env, t)
    assert before[0][:2] == ["running", "running"] and before[3] == 0
    fn = uid("refuse").replace("-", "_")
    env.sql(f"CREATE FUNCTION {fn}() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN RAISE EXCEPTION 'refused by test'; END $$")  # fmt: skip
    env.sql(f"CREATE TRIGGER {fn} BEFORE UPDATE ON dbos.workflow_status"
            f" FOR EACH ROW EXECUTE FUNCTION {fn}()")  # fmt: skip
    try:  # the cancellation, the last write of the transaction, fails
        with pytest.raises(InterruptFailedError, match="refused by test"):
            interrupt(env.client.engine, env.client.dbos, t["root"], None)
    finally:
        env.sql(f"DROP TRIGGER {fn} ON dbos.workflow_status")
        env.sql(f"DROP FUNCTION {fn}()")
    assert state(env, t) == before
