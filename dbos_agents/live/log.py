"""A session's event log: its status, then what came after a reader's cursor.

``read_since`` is the message-only read (``AgentClient.events``). ``read_log`` is the live
one (``AgentClient.stream``, the HTTP event stream, ``dbos-agents follow``): messages
and deltas merged (``live.vocabulary``), with the waits their tool calls opened.
Both read the status first, in one snapshot, so a terminal status is never reported
before the messages of the run it ends.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from .. import _dbos
from ..events import Cursor, PendingEvent, StateEvent
from ..ids import ask_id
from ..records import SessionEvents, StatusEvent
from ..store import pg, transcript
from ..store import state as state_rows
from ..store.pending import with_decoded_arguments
from ..store.pg import Stmt
from ..store.schema import SCHEMA as S
from . import deltas
from .deltas import Logged
from .vocabulary import Merged, merge

BATCH = 500
"""Messages (and deltas) per read, at most: a caller that got a full batch reads again
before it reports a status."""

_STATUS = (
    f"SELECT status, run_seq, final_output, error, token_generation, user_id,"
    f" tenant_id FROM {S}.sessions WHERE id = :s"
)


@dataclass(frozen=True)
class Read:
    events: SessionEvents
    identity: tuple[str | None, str | None] | None
    """The session's (user_id, tenant_id), for a scoped reader; None: no such session."""


def _status(row: Any) -> tuple[StatusEvent, int, tuple[str | None, str | None]]:
    fields = row._asdict()
    generation = fields.pop("token_generation")
    identity = (fields.pop("user_id"), fields.pop("tenant_id"))
    return StatusEvent.model_validate(fields), generation, identity


def read_since(engine: sa.Engine, session_id: str, after_seq: int, limit: int = BATCH) -> Read:
    """The session's status, then its messages with ``seq > after_seq``."""
    with engine.connect() as conn:
        row = conn.execute(sa.text(_STATUS), {"s": session_id}).first()
        messages = transcript.entries(conn, session_id, after_seq, limit)
    if row is None:
        return Read(SessionEvents(status=None, messages=messages), None)
    status, generation, identity = _status(row)
    events = SessionEvents(status=status, messages=messages, token_generation=generation)
    return Read(events, identity)


@dataclass(frozen=True)
class LogRead:
    status: StatusEvent | None
    """None: no such session."""
    token_generation: int | None
    identity: tuple[str | None, str | None] | None
    log: Merged


Plan = Generator[list[Stmt], list[list[Any]], LogRead]
"""A live-log read without its I/O: it yields the statements of each round trip, is sent
their rows, and returns the read (``read_log`` runs it in a thread, ``read_log_async`` on
the event loop)."""

_SNAPSHOT: Stmt = ("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", {})
"""A script's implicit transaction, made one snapshot (the statements after it see the
same rows)."""


def read_log(
    engine: sa.Engine,
    session_id: str,
    after: Cursor,
    limit: int = BATCH,
    system_schema: str = "dbos",
) -> LogRead:
    """``log_plan`` on a pooled connection."""
    plan = log_plan(session_id, after, limit, system_schema)
    with engine.connect() as conn:
        conn.execution_options(isolation_level="REPEATABLE READ")
        with conn.begin():
            stmts = next(plan)
            try:
                while True:
                    stmts = plan.send(pg.pipelined(conn, stmts))
            except StopIteration as done:
                read: LogRead = done.value
                return read


async def read_log_async(
    driver: pg.Driver,
    session_id: str,
    after: Cursor,
    limit: int = BATCH,
    system_schema: str = "dbos",
) -> LogRead:
    """``log_plan`` on an autocommit connection of the caller's event loop, with no thread
    and no pool ping. Its first round (the status, the messages, the deltas) is one script
    in one snapshot (``_SNAPSHOT``): one round trip, and none of a pipeline's
    per-statement work on the loop, which is what most of a live stream's reads are (a
    run's user message, a reply, a run's end). The waits and state versions of the calls
    it names, when it names any, are read right after (pipelined, their plans prepared):
    a wait answered in between is not shown, as for a reader that came a moment later;
    its result is in the reader's next read."""
    plan = log_plan(session_id, after, limit, system_schema)
    rows = (await pg.script_rows(driver, [_SNAPSHOT, *next(plan)]))[1:]
    try:
        more = plan.send(rows)
    except StopIteration as done:
        first: LogRead = done.value
        return first
    rows = await pg.fetch_all(driver, more)
    try:
        plan.send(rows)
    except StopIteration as done:
        second: LogRead = done.value
        return second
    raise AssertionError("a live-log read takes two round trips at most")


def log_plan(session_id: str, after: Cursor, limit: int, system_schema: str) -> Plan:
    """The status, the messages after ``after.seq``, the deltas after ``after.delta`` and
    the open waits of those messages' calls (and of the durable tools' asks and the
    sub-agents' waits those deltas announce). The first round is one snapshot: a message
    and the deltas before it, never half of them. ``read_log`` reads the second in the
    same transaction; ``read_log_async`` right after it."""
    status_rows, message_rows, delta_rows = yield [
        (_STATUS, {"s": session_id}),
        transcript.entries_stmt(session_id, after.seq, limit),
        deltas.read_stmt(session_id, after.delta, limit, after.seq),
    ]
    messages = [transcript.entry_of(r) for r in message_rows]
    logged = [Logged.of_row(r) for r in delta_rows]
    call_ids = [c.id for m in messages for c in m.tool_calls]
    marked: list[str] = []
    for d in logged:
        if d.kind != "progress":
            continue
        if deltas.is_wait_mark(d):  # a sub-agent's wait, by its own id
            marked.append(d.tool_call_id or "")
        else:  # a durable tool's note: the ask it may have opened
            call_ids.append(ask_id(d.tool_call_id or "", d.part))
    results = [m.tool_call_id for m in messages if m.role == "tool" and m.tool_call_id]
    looked = bool(call_ids or marked)
    more = [_waits_stmt(session_id, call_ids, marked, system_schema)] if looked else []
    if results:
        more.append(state_rows.for_calls_stmt(session_id, results))
    got = (yield more) if more else []
    waits = _open_waits(got.pop(0)) if looked else {}
    states = _states(got.pop(0)) if results else {}
    row = status_rows[0] if status_rows else None
    log = merge(after, messages, logged, limit=limit, pending=waits, states=states)
    if row is None:
        return LogRead(None, None, None, log)
    status, generation, identity = _status(row)
    return LogRead(status, generation, identity, log)


def _states(rows: list[Any]) -> dict[str, StateEvent]:
    """The state versions these results committed (``event: state``)."""
    return {
        cid: StateEvent(
            version=v.version,
            run=v.run_seq,
            turn=v.turn,
            tool_call_id=cid,
            state=v.state,
        )
        for cid, v in state_rows.by_call(rows).items()
    }


def _waits_stmt(
    session_id: str, call_ids: list[str], marked: list[str], system_schema: str
) -> Stmt:
    """Waits still waiting for an answer (their run not ended): of these calls of the
    session's own, and of the sub-agents' waits marked in its log (it is their root)."""
    ended = ", ".join(f"'{s}'" for s in _dbos.ENDED)
    return (
        "SELECT root_session_id, tool_call_id, owner_session_id, kind, tool, arguments,"
        f" output_schema, deadline FROM {S}.pending_calls WHERE ((owner_session_id = :s"
        " AND tool_call_id = ANY(:ids)) OR (root_session_id = :s AND tool_call_id ="
        " ANY(:marked))) AND status = 'waiting' AND NOT EXISTS (SELECT 1"
        f" FROM {_dbos.quoted(system_schema)}.workflow_status w"
        f" WHERE w.workflow_uuid = owner_workflow_id AND w.status IN ({ended}))",
        {"s": session_id, "ids": call_ids, "marked": marked},
    )


def _open_waits(rows: list[Any]) -> dict[str, PendingEvent]:
    return {
        r.tool_call_id: PendingEvent.model_validate(with_decoded_arguments(r._asdict()))
        for r in rows
    }
