"""The session workflow's writes, composed from the table modules in ``store/``.

A turn's writes are one plain transaction inside the model turn (``record_turn``), made
replay-safe by storing the turn's output with the turn. A server tool's attempt
(``store.calls.attempt``) commits before the handler runs, so a re-executed call learns an
earlier attempt may have run. The two rare writes of a wait's timeout and a persistent
session's idle end are DBOS datasource transactions: their rows and their checkpoint
commit together, so a replay never writes twice. (The run's begin and end are in
``run_bounds``.)
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Literal, ParamSpec, TypeVar

import psycopg
from dbos import AsyncSQLAlchemyDatasource
from pydantic import BaseModel, Field

from ..agent import Agent
from ..live import deltas as deltas_table
from ..live.announce import Announcer
from ..mcp.server import Listing
from ..messages import JSONValue, Message, ModelResponse, ToolCall
from ..outcome import RunSpec
from ..results import ToolResult
from ..store import calls, pending, pg, sessions, transcript
from ..store.retry import retry_transient
from . import drain

P = ParamSpec("P")
R = TypeVar("R")


def _gated(fn: Callable[P, Coroutine[Any, Any, R]]) -> Callable[P, Coroutine[Any, Any, R]]:
    """Refuse to start the write during a drain (see ``drain``)."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        async with drain.step():
            return await fn(*args, **kwargs)

    return wrapper


@dataclass(frozen=True)
class WaitSpec:
    """A client-tool or approval call to register before waiting on it."""

    tool_call_id: str
    kind: str
    tool: str
    arguments: str
    timeout_sec: float
    output_schema: dict[str, JSONValue] | None

    @classmethod
    def of(
        cls, agent: Agent, call: ToolCall, kind: str, schema: dict[str, JSONValue] | None
    ) -> WaitSpec:
        timeout = agent.wait_timeout(call.name).total_seconds()
        return cls(call.id, kind, call.name, call.arguments, timeout, schema)


@dataclass(frozen=True)
class Opened:
    """The waits a model turn opens in its own transaction, with the deadlines it fixed
    (recorded in the turn's output) and the calls it marks dispatched."""

    owner_workflow_id: str
    waits: list[WaitSpec]
    deadlines: dict[str, float]
    dispatched: list[str]


class TurnRecord(BaseModel):
    """What a model turn recorded with its rows (``usage.response``): a re-executed turn
    returns it instead of asking the model again."""

    response: ModelResponse
    notices: list[Message] = Field(default_factory=list)
    """Late-answer notices delivered just before this turn's model call."""
    deadlines: dict[str, float] = Field(default_factory=dict)
    """The absolute deadline of each wait the turn opened, by call id."""
    tools: list[Listing] | None = None
    """The MCP servers' tool lists the run saw (its first turn only; ``loop.mcp``)."""


@dataclass(frozen=True)
class CallResult:
    """A call's result on its way into the transcript (the next model turn writes it, or
    the run's end): ``recorded`` when the call's ledger row already holds it (a server
    call's attempt committed it), ``waited`` when a pending row waits for it to resolve."""

    result: ToolResult
    recorded: bool = False
    waited: bool = False


@dataclass(frozen=True)
class BeginResult:
    began: bool
    """False when the run was fenced off before it began (interrupted meanwhile)."""
    messages: list[Message]


_DANGLING = {
    "requested": "The session was interrupted before this call started. It did not run.",
    "dispatched": (
        "The session was interrupted while this call was running. Its outcome is unknown: "
        "it may or may not have taken effect."
    ),
}


class Ledger:
    """The workflow's writes, bound to one datasource (one per worker process)."""

    def __init__(self, ds: AsyncSQLAlchemyDatasource, flush_sec: float = 0.005) -> None:
        self.ds = ds
        self.announcer = Announcer(ds.engine, flush_sec, fenced=sessions.is_fence)
        """Readers of a session hear of each write the ledger commits (``live.announce``)."""
        tx = ds.transaction
        rc: Literal["READ COMMITTED"] = "READ COMMITTED"
        self.close_inbox = tx(name="dbos_agents.close_inbox.v1", isolation_level=rc)(
            _gated(self._close_inbox)
        )
        self.settle_timeout = tx(name="dbos_agents.settle_timeout.v1", isolation_level=rc)(
            _gated(self._settle_timeout)
        )

    @property
    def db(self) -> Any:
        return self.ds.sql_session()

    def attempt(
        self,
        session_id: str,
        tool_call_id: str,
        token: str,
        *,
        exclusive: bool,
        run_seq: int | None = None,
        with_state: bool = False,
    ) -> AbstractAsyncContextManager[calls.Attempt]:
        """A server tool's attempt on a connection of its own (``store.calls.attempt``)."""
        return calls.attempt(
            self.ds.engine,
            session_id,
            tool_call_id,
            token,
            exclusive=exclusive,
            run_seq=run_seq,
            with_state=with_state,
        )

    async def recorded_result(self, session_id: str, tool_call_id: str) -> ToolResult | None:
        """The result an attempt of this call committed, if any (a replay's read)."""

        async def read() -> ToolResult | None:
            async with pg.driver(self.ds.engine) as conn:
                rows = await pg.fetch(conn, calls.recorded_stmt(session_id, tool_call_id))
            found = rows[0].result if rows else None
            return None if found is None else ToolResult.model_validate(found)

        return await retry_transient("read tool result", read)

    async def turn_state(self, spec: RunSpec, turn: int) -> tuple[TurnRecord | None, list[Message]]:
        """In one round trip: what an earlier execution of this model turn recorded (if
        anything), and the late answers the model has not seen yet."""

        async def read() -> tuple[TurnRecord | None, list[Message]]:
            async with pg.driver(self.ds.engine) as conn:
                (row,) = await pg.fetch(conn, transcript.turn_state_stmt(spec, turn))
            recorded, late = transcript.turn_state(row)
            record = None if recorded is None else TurnRecord.model_validate(recorded)
            return record, late_notices(late)

        return await retry_transient("read turn state", read)

    async def logged_deltas(self, spec: RunSpec, turn: int) -> list[deltas_table.Delta]:
        """What earlier executions of this turn streamed (a re-executed turn's read)."""

        async def read() -> list[deltas_table.Delta]:
            async with pg.driver(self.ds.engine) as conn:
                rows = await pg.fetch(
                    conn, deltas_table.logged_stmt(spec["session_id"], spec["run_seq"], turn)
                )
            return [deltas_table.Delta.of_row(r) for r in rows]

        return await retry_transient("read logged deltas", read)

    async def record_results(self, spec: RunSpec, results: list[CallResult]) -> None:
        """The previous turn's results, ahead of a streamed turn (otherwise the turn's record
        writes them): readers see a tool's result before the reply that reads it. Fenced
        like the turn; written once (a re-executed turn finds them written)."""
        sid = spec["session_id"]
        stmts = [sessions.lock_running_stmt(sid, spec["run_seq"]), *result_stmts(spec, results)]

        async def write() -> None:
            try:
                await pg.script(self.ds.engine, stmts)
            except psycopg.Error as exc:
                if sessions.is_fence(exc):
                    raise sessions.RunFenced(sid) from None
                raise

        await retry_transient("record results", write)
        self.announce(spec)

    def stage_results(self, spec: RunSpec, results: list[CallResult]) -> None:
        """``record_results`` without a commit of its own: written with the streamed
        reply's first batch of deltas, ahead of them, or (a reply done before its first
        batch) by the turn's record, when ``Announcer.take_staged`` says so."""
        sid = spec["session_id"]
        self.announcer.stage(
            sid, [sessions.lock_running_stmt(sid, spec["run_seq"]), *result_stmts(spec, results)]
        )

    async def record_turn(
        self,
        spec: RunSpec,
        turn: int,
        previous: list[CallResult],
        response: ModelResponse,
        requested: list[calls.Requested],
        opened: Opened,
        expect_notices: bool,
        deltas: list[deltas_table.Delta] | None = None,
        tools: list[Listing] | None = None,
    ) -> TurnRecord:
        """The model turn's one write (a plain transaction, no checkpoint of its own): the
        previous turn's results, late-answer notices, this turn's assistant message, ledger
        rows, waits and usage. Returns the turn's ``TurnRecord``, stored with the turn so a
        re-executed turn replays it.

        One round trip (a script), or a pipelined transaction of two when late answers
        wait (their notices are read before the rows after them are written). The waits'
        deadlines are part of the record, so a replayed turn opens nothing twice."""
        sid = spec["session_id"]
        assistant = Message(role="assistant", content=response.text, tool_calls=response.tool_calls)

        def rest(record: TurnRecord) -> list[pg.Stmt]:
            return [
                *(transcript.append_stmt(spec, None, m) for m in [*record.notices, assistant]),
                *calls.insert_requested_stmts(
                    sid, spec["run_seq"], turn, requested, set(opened.dispatched)
                ),
                *_open_stmts(spec, opened),
                transcript.record_usage_stmt(spec, turn, response, record),
            ]

        # Fenced: an interrupted run (or one a newer run overtook) records no turn. The
        # turn's last deltas go after the results the reply read and before its message
        # (the one writer of the session's deltas now: ``Announcer.settle``).
        head = [
            sessions.count_running_turn_stmt(sid, spec["run_seq"], response.usage),
            *result_stmts(spec, previous),
            *([deltas_table.insert_stmt(sid, deltas)] if deltas else []),
        ]

        async def write() -> TurnRecord:
            if not expect_notices:  # the common case: one script, one round trip
                record = TurnRecord(response=response, deadlines=opened.deadlines, tools=tools)
                await pg.script(self.ds.engine, [*head, *rest(record)])
                return record
            async with pg.transaction(self.ds.engine) as batch:
                await batch.send_all(head)
                late = await batch.send(pending.take_late_answers_stmt(sid))
                notices = late_notices(await late.fetchall())
                record = TurnRecord(
                    response=response, notices=notices, deadlines=opened.deadlines, tools=tools
                )
                await batch.send_all(rest(record))
                return record

        async def write_once() -> TurnRecord:
            try:
                return await write()
            except psycopg.Error as exc:
                if sessions.is_fence(exc):
                    raise sessions.RunFenced(sid) from None
                if not isinstance(exc, psycopg.errors.UniqueViolation):
                    raise
                # Another execution of this run (a stale owner still running, or the new
                # one) recorded this turn first: its turn is the turn, as on a replay.
                recorded, _ = await self.turn_state(spec, turn)
                if recorded is None:
                    raise
                return recorded

        record = await retry_transient("record turn", write_once)
        self.announce(spec)
        return record

    def announce(self, spec: RunSpec) -> None:
        """The session (and the root whose tree it is in) changed: readers, look again."""
        self.announcer.announce(spec["session_id"], spec["root_session_id"])

    async def _close_inbox(self, session_id: str, run_seq: int) -> bool:
        return await sessions.close_inbox(self.db, session_id, run_seq)

    async def _settle_timeout(self, root_session_id: str, tool_call_id: str) -> str:
        return await pending.settle_timeout(self.db, root_session_id, tool_call_id)


def _open_stmts(spec: RunSpec, opened: Opened) -> list[pg.Stmt]:
    """The turn's waits; a sub-agent's are marked in its root's log too (chat UIs follow
    the root)."""
    marks = deltas_table.wait_mark_stmts(
        spec["session_id"],
        spec["root_session_id"],
        [(w.tool_call_id, w.tool) for w in opened.waits],
    )
    return [
        pending.open_stmt(
            root_session_id=spec["root_session_id"],
            tool_call_id=w.tool_call_id,
            owner_session_id=spec["session_id"],
            owner_workflow_id=opened.owner_workflow_id,
            kind=w.kind,
            tool=w.tool,
            arguments=w.arguments,
            deadline=opened.deadlines[w.tool_call_id],
            output_schema=w.output_schema,
            user_id=spec["user_id"],
            tenant_id=spec["tenant_id"],
        )
        for w in opened.waits
    ] + marks


def dangling_results(rows: list[Any]) -> list[CallResult]:
    """The results of ``calls.unanswered`` rows: what an attempt recorded after all, else
    an ``interrupted`` failure saying whether the call may have run (their waits were
    cancelled or closed already)."""
    return [
        CallResult(ToolResult.model_validate(r.result), recorded=True)
        if r.result is not None
        else CallResult(
            ToolResult.failure(
                r.tool_call_id,
                r.tool,
                "interrupted",
                _DANGLING["requested" if r.status == "requested" else "dispatched"],
            )
        )
        for r in rows
    ]


def result_stmts(spec: RunSpec, results: list[CallResult]) -> list[pg.Stmt]:
    """Per result: its tool message, its ledger row settled (unless the call's attempt
    recorded it already), its wait resolved (if it had one). The caller holds the session
    row lock (message numbers)."""
    stmts: list[pg.Stmt] = []
    for r in results:
        res = r.result
        msg = Message(
            role="tool", content=res.content(), tool_call_id=res.tool_call_id, name=res.tool
        )
        stmts.append(transcript.append_result_stmt(spec, msg))
        if not r.recorded:
            stmts.append(calls.settle_stmt(spec["session_id"], res))
        if r.waited:
            stmts.append(pending.resolve_stmt(spec["root_session_id"], res.tool_call_id))
    return stmts


def late_notices(rows: list[Any]) -> list[Message]:
    """One system message per late answer, in call order."""
    return [
        Message(
            role="system",
            content=(
                f"Late answer: the result of {row.tool} (call {row.tool_call_id}) arrived "
                "after that call had timed out, so it was not used. It was: "
                + json.dumps(row.late_submission, sort_keys=True)
            ),
        )
        for row in sorted(rows, key=lambda r: r.tool_call_id)
    ]
