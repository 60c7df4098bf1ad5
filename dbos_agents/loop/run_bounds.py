"""A run's begin and end: plain transactions on the driver that replay from our own rows
(no DBOS checkpoint of their own).

**Begin** marks the run running (fenced on ``run_seq``), answers calls an interrupted run
left open, delivers late answers, appends the user message and returns the transcript. Its
replay record is that user message: when this run's user message already exists, an
earlier execution began the run, so the transaction is rolled back (nothing taken twice)
and the transcript up to that message is returned, exactly what the first execution read.
An execution that resumes a parked wait (``execution.replay_likely``) reads that first,
without the transaction, and with it the turns the run recorded (``execution.read_ahead``):
one round trip, nothing locked; the transaction follows only if the run had not begun
after all.

**End** is fenced on ``run_seq`` and idempotent (results of calls already answered are
skipped; the outcome is set only while the run is busy; waits are closed only while the
run is the session's), so running it again, even after a newer run began, changes nothing.

Both are one transaction in two round trips at most (pipelined), and like every write of
the workflow neither starts during a drain (``drain``).
"""

from __future__ import annotations

from typing import Any

from dbos import DBOS
from sqlalchemy.ext.asyncio import AsyncEngine

from ..ids import run_workflow_id
from ..live import deltas
from ..messages import Message
from ..outcome import RunOutcome, RunSpec
from ..store import calls, pending, pg, runs, sessions, transcript
from ..store.retry import retry_transient
from . import drain, execution
from .ledger import (
    BeginResult,
    CallResult,
    TurnRecord,
    dangling_results,
    late_notices,
    result_stmts,
)


async def begin(engine: AsyncEngine, spec: RunSpec) -> BeginResult:
    """The run's begin (see the module doc)."""
    sid = spec["session_id"]
    workflow_id = DBOS.workflow_id or run_workflow_id(sid, spec["run_seq"])

    async def replayed() -> BeginResult | None:
        """A resumed execution's begin, read (one round trip, nothing locked or written);
        None when the run had not begun after all."""
        async with pg.driver(engine) as conn, conn.pipeline():
            batch = pg.Batch(conn)
            state_cur = await batch.send(transcript.run_state_stmt(spec))
            read = await batch.send(transcript.read_begun_stmt(spec))
            turns = await batch.send(transcript.recorded_turns_stmt(spec))
            (state,) = await state_cur.fetchall()
            rows = await read.fetchall()
            recorded = {
                r.turn: TurnRecord.model_validate(r.response) for r in await turns.fetchall()
            }
        if state.user_seq is None:
            return None
        execution.read_ahead(spec["run_seq"], recorded)  # its turns replay without a read
        return _replay_result(state, rows)

    async def write() -> BeginResult:
        if execution.replay_likely() and (done := await replayed()) is not None:
            return done
        async with pg.driver(engine) as conn, conn.pipeline():
            batch = pg.Batch(conn)
            await batch.send(("BEGIN", {}))
            if spec["session_id"] != spec["root_session_id"]:
                # A sub-agent begins in step with an interrupt of its tree (which locks the
                # tree first): either the interrupt sees its row, or it sees the parent's
                # interrupted status below.
                await batch.send(sessions.share_root_stmt(spec["root_session_id"]))
            upserted = await batch.send(sessions.begin_stmt(spec, workflow_id))
            await batch.send(sessions.lock_stmt(sid))
            state_cur = await batch.send(transcript.run_state_stmt(spec))
            open_cur = await batch.send(calls.unanswered_stmt(sid))
            late_cur = await batch.send(pending.take_late_answers_stmt(sid))
            began = bool(await upserted.fetchall())
            (state,) = await state_cur.fetchall()
            if state.user_seq is not None:  # a replay: the first execution's view
                await batch.send(("ROLLBACK", {}))
                read = await batch.send(transcript.read_stmt(sid, upto_seq=state.user_seq))
                return _replay_result(state, await read.fetchall())
            execution.step_ran()
            if began and state.parent_status == "interrupted":  # the tree was interrupted
                await batch.send(sessions.mark_interrupted_stmt(sid))
                began = False
            dangling = dangling_results(await open_cur.fetchall())
            notices = late_notices(await late_cur.fetchall())
            user = Message(role="user", content=spec["message"])
            await batch.send_all(result_stmts(spec, dangling))
            await batch.send_all(transcript.append_stmt(spec, None, m) for m in [*notices, user])
            read = await batch.send(transcript.read_stmt(sid))
            await batch.send(("COMMIT", {}))
            return BeginResult(began, transcript.to_messages(await read.fetchall()))

    async with drain.step():  # like every write of the workflow: not during a drain
        return await retry_transient("begin run", write)


def _replay_result(state: Any, rows: list[Any]) -> BeginResult:
    """A replayed begin: the transcript up to the run's user message, as the first
    execution read it; not begun if the session was interrupted before the run's turn."""
    return BeginResult(
        began=state.status != "interrupted" or bool(state.turned),
        messages=transcript.to_messages(rows),
    )


async def end(
    engine: AsyncEngine,
    spec: RunSpec,
    outcome: RunOutcome,
    open_inbox: bool = False,
    results: list[CallResult] | None = None,
    shown: list[deltas.Delta] | None = None,
) -> None:
    """The run's end (see the module doc), its outcome recorded and announced with it
    (``store.runs``); ``shown``: the run's deltas not written yet, written before it ends."""
    sid, run = spec["session_id"], spec["run_seq"]
    status = outcome.status
    tail = [
        *([deltas.insert_stmt(sid, shown)] if shown else []),
        pending.close_open_stmt(sid, f"run_{status}", run),
        sessions.finish_stmt(spec, status, outcome.output, outcome.error, open_inbox),
        *runs.record_stmts(outcome),
    ]

    async def write() -> None:
        if not results:  # the common case: one script, one round trip
            await pg.script(engine, [sessions.lock_stmt(sid), *tail])
            return
        async with pg.transaction(engine) as batch:
            cur = await batch.send(sessions.run_seq_stmt(sid))
            ids = [r.result.tool_call_id for r in results]
            answered = await batch.send(transcript.answered_stmt(sid, ids))
            if [r.run_seq for r in await cur.fetchall()] == [run]:
                done = {r.tool_call_id for r in await answered.fetchall()}
                unanswered = [r for r in results if r.result.tool_call_id not in done]
                await batch.send_all(result_stmts(spec, unanswered))
            await batch.send_all(tail)

    async with drain.step():
        await retry_transient("finish run", write)
