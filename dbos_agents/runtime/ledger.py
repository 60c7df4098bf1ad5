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
from typing import Any, Literal, ParamSpec, TypedDict, TypeVar

import psycopg
from dbos import AsyncSQLAlchemyDatasource

from ..messages import Message, Usage
from ..outcome import RunSpec
from ..results import ToolResult
from ..store import calls, pending, pg, sessions, transcript
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


class WaitSpec(TypedDict):
    """A client-tool or approval call to register before waiting on it."""

    tool_call_id: str
    kind: str
    tool: str
    arguments: str
    timeout_sec: float
    output_schema: dict[str, Any] | None


@dataclass(frozen=True)
class Opened:
    """The waits a model turn opens in its own transaction, with the deadlines it fixed
    (recorded in the turn's output) and the calls it marks dispatched."""

    owner_workflow_id: str
    waits: list[WaitSpec]
    deadlines: dict[str, float]
    dispatched: list[str]


class LedgerCall(TypedDict):
    tool_call_id: str
    tool: str
    kind: str
    arguments: str
    idempotency_key: str
    safe_to_retry: bool


class BeginResult(TypedDict):
    began: bool
    """False when the run was fenced off before it began (interrupted meanwhile)."""
    messages: list[dict[str, Any]]


_DANGLING = {
    "requested": "The session was interrupted before this call started. It did not run.",
    "dispatched": (
        "The session was interrupted while this call was running. Its outcome is unknown: "
        "it may or may not have taken effect."
    ),
}


class Ledger:
    """The workflow's writes, bound to one datasource (one per worker process)."""

    def __init__(self, ds: AsyncSQLAlchemyDatasource) -> None:
        self.ds = ds
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
    ) -> AbstractAsyncContextManager[calls.Attempt]:
        """A server tool's attempt on a connection of its own (``store.calls.attempt``)."""
        return calls.attempt(
            self.ds.engine, session_id, tool_call_id, token, exclusive=exclusive, run_seq=run_seq
        )

    async def recorded_result(self, session_id: str, tool_call_id: str) -> dict[str, Any] | None:
        """The result an attempt of this call committed, if any (a replay's read)."""

        async def read() -> dict[str, Any] | None:
            async with pg.driver(self.ds.engine) as conn:
                rows = await pg.fetch(conn, calls.recorded_stmt(session_id, tool_call_id))
            return dict(rows[0].result) if rows and rows[0].result is not None else None

        return await calls.retry_transient("read tool result", read)

    async def turn_state(
        self, spec: RunSpec, turn: int
    ) -> tuple[dict[str, Any] | None, list[Message]]:
        """In one round trip: what an earlier execution of this turn's model step recorded
        (if anything), and the late answers the model has not seen yet."""

        async def read() -> tuple[dict[str, Any] | None, list[Message]]:
            async with pg.driver(self.ds.engine) as conn:
                (row,) = await pg.fetch(conn, transcript.turn_state_stmt(spec, turn))
            recorded, late = transcript.turn_state(row)
            return recorded, late_notices(late)

        return await calls.retry_transient("read turn state", read)

    async def record_turn(
        self,
        spec: RunSpec,
        turn: int,
        previous: list[dict[str, Any]],
        assistant: Message,
        ledger_calls: list[LedgerCall],
        usage: Usage,
        model: str | None,
        response: dict[str, Any],
        expect_notices: bool,
        opened: Opened,
    ) -> dict[str, Any]:
        """The model step's one write (a plain transaction, no checkpoint of its own): the
        previous turn's results, late-answer notices, this turn's assistant message, ledger
        rows and usage. Returns the step's output (``response`` and the notices it
        delivered), stored with the turn so a re-executed step replays it.

        One round trip (a script), or a pipelined transaction of two when late answers
        wait (their notices are read before the rows after them are written). The turn's
        waits open in it too (``opened``): their deadlines are part of the output, so a
        replayed turn returns them and opens nothing twice."""
        sid = spec["session_id"]
        extra = {"deadlines": opened.deadlines}

        def rest(notices: list[Message], output: dict[str, Any]) -> list[pg.Stmt]:
            return [
                *(transcript.append_stmt(spec, None, m) for m in [*notices, assistant]),
                *calls.insert_requested_stmts(
                    sid,
                    spec["run_seq"],
                    turn,
                    [dict(c) for c in ledger_calls],
                    set(opened.dispatched),
                ),
                *_open_stmts(spec, opened),
                transcript.record_usage_stmt(spec, turn, model, usage, output),
                sessions.add_usage_stmt(sid, usage),
            ]

        # Fenced: an interrupted run (or one a newer run overtook) records no turn.
        head = [sessions.lock_running_stmt(sid, spec["run_seq"]), *result_stmts(spec, previous)]

        async def write() -> dict[str, Any]:
            if not expect_notices:  # the common case: one script, one round trip
                output: dict[str, Any] = {"response": response, "notices": [], **extra}
                await pg.script(self.ds.engine, [*head, *rest([], output)])
                return output
            async with pg.transaction(self.ds.engine) as batch:
                await batch.send_all(head)
                late = await batch.send(pending.take_late_answers_stmt(sid))
                notices = late_notices(await late.fetchall())
                output = {
                    "response": response,
                    "notices": [m.model_dump(mode="json") for m in notices],
                    **extra,
                }
                await batch.send_all(rest(notices, output))
                return output

        async def write_once() -> dict[str, Any]:
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

        return await calls.retry_transient("record turn", write_once)

    async def _close_inbox(self, session_id: str, run_seq: int) -> bool:
        return await sessions.close_inbox(self.db, session_id, run_seq)

    async def _settle_timeout(self, root_session_id: str, tool_call_id: str) -> str:
        return await pending.settle_timeout(self.db, root_session_id, tool_call_id)


def _open_stmts(spec: RunSpec, opened: Opened) -> list[pg.Stmt]:
    return [
        pending.open_stmt(
            root_session_id=spec["root_session_id"],
            tool_call_id=w["tool_call_id"],
            owner_session_id=spec["session_id"],
            owner_workflow_id=opened.owner_workflow_id,
            kind=w["kind"],
            tool=w["tool"],
            arguments=w["arguments"],
            deadline=opened.deadlines[w["tool_call_id"]],
            output_schema=w["output_schema"],
            user_id=spec["user_id"],
            tenant_id=spec["tenant_id"],
        )
        for w in opened.waits
    ]


def dangling_results(rows: list[Any]) -> list[dict[str, Any]]:
    """The results of ``calls.unanswered`` rows: what an attempt recorded after all, else
    an ``interrupted`` failure saying whether the call may have run."""
    return [
        dict(r.result)
        if r.result is not None
        else ToolResult.failure(
            r.tool_call_id,
            r.tool,
            "interrupted",
            _DANGLING["requested" if r.status == "requested" else "dispatched"],
        ).model_dump(mode="json")
        for r in rows
    ]


def result_stmts(spec: RunSpec, results: list[dict[str, Any]]) -> list[pg.Stmt]:
    """Per result: its tool message, its ledger row settled, its wait resolved. The
    caller holds the session row lock (message numbers)."""
    stmts: list[pg.Stmt] = []
    for raw in results:
        res = ToolResult.model_validate(raw)
        msg = Message(
            role="tool", content=res.content(), tool_call_id=res.tool_call_id, name=res.tool
        )
        stmts += [
            transcript.append_stmt(spec, None, msg),
            calls.settle_stmt(spec["session_id"], raw),
            pending.resolve_stmt(spec["root_session_id"], res.tool_call_id),
        ]
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
