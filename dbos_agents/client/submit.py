"""The submit policy (DESIGN §4) and interrupts, as every client runs them.

A submit reads the pending row with its run's DBOS status, decides the outcome, validates
the delivery against the stored output schema, marks the row submitted and sends the
delivery to the owning workflow (topic and idempotency key = tool call id). Row update and
message commit together, so a submit is delivered once or not at all, and 50 concurrent
identical submits yield one ``accepted``. A wait whose run already ended is closed and
answered ``unknown_tool_call`` / ``run_ended``: nobody would read the answer.

The common case (the wait is waiting, its run alive) is two statements in autocommit: the
read, then one statement that marks the row only if it is still waiting and inserts DBOS's
message from the marked row (``_dbos.send_from_sql``; a fast path). Every other case, and a row that
changed between the two, is decided in one transaction holding the row's lock, the message
sent with ``DBOSClient.send_in_transaction``. A submit's round trips are waited on by both
the submitter and the run it resumes (five in the transaction, two here).

An interrupt marks the tree's busy sessions, cancels their waits (waking them: a DBOS
cancel does not wake a blocked ``recv``) and cancels their workflows, all in one
transaction: it either happens entirely or raises and changes nothing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
import jsonschema
import sqlalchemy as sa
from dbos import DBOSClient

from .. import _dbos, storable
from ..delivery import (
    Delivery,
    InterruptDelivery,
    ResultDelivery,
    WaitKind,
    answers,
    encode,
)
from ..errors import (
    AccessDeniedError,
    InterruptFailedError,
    InvalidRequestError,
    InvalidResultError,
    NotRootSessionError,
    SessionNotFoundError,
)
from ..records import (
    InterruptOutcome,
    SubmitOutcome,
    SubmitStatus,
    UnknownReason,
)
from ..store import pending as pending_rows
from ..store import pg, queries, sessions
from ..store.pg import Stmt
from ..store.traced import with_context
from .scope import Scope, seen

log = logging.getLogger("dbos_agents")
_WANTED = {"approval": "an approval", "client": "a client-tool result"}


def _schema_errors(schema: dict[str, Any], value: Any) -> list[dict[str, object]]:
    # Formats are checked too (date-time, uuid, email, ...): a pydantic output model emits
    # them, and the worker's model would refuse what the bare schema lets through.
    validator = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    return [
        {"path": "/".join(str(p) for p in e.absolute_path) or "(root)", "message": e.message}
        for e in sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    ]


Decision = tuple[SubmitStatus, UnknownReason | None]
OnLoop = Callable[[Callable[[pg.Driver], Awaitable[Decision | None]]], Awaitable[Decision | None]]
"""``AsyncAgentClient._on_loop``: statements on one of the event loop's kept connections."""


def submit(
    engine: sa.Engine,
    client: DBOSClient,
    *,
    session_id: str,
    tool_call_id: str,
    delivery: Delivery,
    schema: str,
    scope: Scope | None,
) -> SubmitOutcome:
    """Deliver ``delivery`` to the workflow waiting on ``tool_call_id`` (see module doc).
    Under a ``scope``, the wait (or the session) read first must be in it: checked on that
    row, before anything is validated or changed."""
    payload = _payload(session_id, tool_call_id, delivery)
    fast = _Fast.of(client, schema, scope, session_id, tool_call_id, delivery, payload)
    decided = None
    if fast is not None:
        with engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT")
            row = conn.execute(sa.text(fast.read[0]), fast.read[1]).first()
            if fast.goes(row):
                marked = conn.execute(sa.text(fast.mark[0]), fast.mark[1]).scalar_one()
                decided = fast.decided(marked)
    if decided is None:
        decided = _decide_locked(
            engine, client, schema, scope, session_id, tool_call_id, delivery, payload
        )
    return _outcome(session_id, tool_call_id, delivery, decided)


async def submit_on(
    on_loop: OnLoop,
    engine: sa.Engine,
    client: DBOSClient,
    *,
    session_id: str,
    tool_call_id: str,
    delivery: Delivery,
    schema: str,
    scope: Scope | None,
) -> SubmitOutcome:
    """``submit`` for the async client: the common case's two statements on one of its
    event loop's connections (``on_loop``), the locked transaction in a thread. A connection
    lost after the mark committed reads as ``already_completed`` on the retry: the message
    was sent once either way."""
    payload = _payload(session_id, tool_call_id, delivery)
    fast = _Fast.of(client, schema, scope, session_id, tool_call_id, delivery, payload)
    decided = None
    if fast is not None:
        decided = await on_loop(fast.on)
    if decided is None:
        decided = await anyio.to_thread.run_sync(
            _decide_locked,
            engine,
            client,
            schema,
            scope,
            session_id,
            tool_call_id,
            delivery,
            payload,
        )
    return _outcome(session_id, tool_call_id, delivery, decided)


def _payload(session_id: str, tool_call_id: str, delivery: Delivery) -> dict[str, Any]:
    if isinstance(delivery, InterruptDelivery):
        raise InvalidRequestError("an interrupt is not a submission: use interrupt()")
    storable.check_id(session_id, "session_id")
    storable.check_id(tool_call_id, "tool_call_id")
    for field, value in delivery:
        storable.check_value(value, field)
    try:
        json.dumps(delivery.model_dump(mode="json"))
    except (TypeError, ValueError) as exc:
        raise InvalidRequestError(f"the submission is not JSON-serializable: {exc}") from exc
    return encode(delivery)


def _outcome(
    session_id: str, tool_call_id: str, delivery: Delivery, decided: Decision
) -> SubmitOutcome:
    status, reason = decided
    if status == "accepted":
        log.info(
            "client_tool.submitted",
            extra={
                "event": "client_tool.submitted",
                "session_id": session_id,
                "tool_call_id": tool_call_id,
                "kind": delivery.kind,
            },
        )
    return SubmitOutcome(
        status=status, session_id=session_id, tool_call_id=tool_call_id, reason=reason
    )


@dataclass(frozen=True)
class _Fast:
    """The common case, a wait that is waiting and a run that is alive, in two statements
    and no transaction of ours: ``read``, then ``mark``, which marks the wait submitted
    only if it is still waiting and sends the message with it (``_dbos``). Anything else,
    or a row that changed in between, is for the locked transaction."""

    read: Stmt
    mark: Stmt
    scope: Scope | None
    session_id: str
    tool_call_id: str
    delivery: Delivery

    @classmethod
    def of(
        cls,
        client: DBOSClient,
        schema: str,
        scope: Scope | None,
        session_id: str,
        tool_call_id: str,
        delivery: Delivery,
        payload: dict[str, Any],
    ) -> _Fast | None:
        if not _dbos.can_send_in_statement(client):
            return None
        read = pending_rows.row_for_submit_stmt(session_id, tool_call_id, schema, lock=False)
        sql = (
            f"WITH marked AS ({pending_rows.mark_if_waiting_sql()}),"
            f" sent AS ({_dbos.send_from_sql(client, 'marked', 'owner_workflow_id')})"
            " SELECT count(*) FROM marked"
        )
        params = {
            "s": session_id,
            "id": tool_call_id,
            "p": json.dumps(payload),
            **_dbos.send_params(client, with_context(payload), tool_call_id, tool_call_id),
        }
        return cls(read, (sql, params), scope, session_id, tool_call_id, delivery)

    def goes(self, row: Any) -> bool:
        """Whether ``mark`` is next (raises what the delivery breaks, changing nothing)."""
        if row is None or row.status != "waiting":
            return False
        if self.scope is not None:
            self.scope.check(self.session_id, row.user_id, row.tenant_id)
        if row.run_status is None or row.run_status in _dbos.ENDED:
            return False
        _check_delivery(row, self.tool_call_id, self.delivery)
        return True

    @staticmethod
    def decided(marked: int) -> Decision | None:
        return ("accepted", None) if marked else None

    async def on(self, driver: pg.Driver) -> Decision | None:
        """Both statements on an autocommit connection of the async client's loop (a
        delivery it refuses raises there, and that connection is not kept)."""
        rows = await pg.fetch(driver, self.read)
        if not self.goes(rows[0] if rows else None):
            return None
        return self.decided((await pg.fetch(driver, self.mark))[0][0])


def _check_delivery(row: Any, tool_call_id: str, delivery: Delivery) -> None:
    """What the wait accepts: its kind, and a result valid against its output schema."""
    wanted: WaitKind | None = answers(delivery)
    if wanted is not None and row.kind != wanted:
        raise InvalidRequestError(
            f"tool call {tool_call_id!r} waits for {_WANTED[row.kind]}, not {_WANTED[wanted]}"
        )
    if isinstance(delivery, ResultDelivery) and row.output_schema is not None:
        errors = _schema_errors(row.output_schema, delivery.result)
        if errors:
            log.warning(
                "client_tool.validation_failed",
                extra={"event": "client_tool.validation_failed", "tool_call_id": tool_call_id},
            )
            raise InvalidResultError(
                f"result for {tool_call_id!r} does not match the tool's output schema", errors
            )


def _decide_locked(
    engine: sa.Engine,
    client: DBOSClient,
    schema: str,
    scope: Scope | None,
    session_id: str,
    tool_call_id: str,
    delivery: Delivery,
    payload: dict[str, Any],
) -> Decision:
    """Every other case, in one transaction holding the wait's row lock."""
    with engine.begin() as conn:
        row = pending_rows.row_for_submit(conn, session_id, tool_call_id, schema)
        if row is None:
            owner = sessions.identity(conn, session_id)
            if owner is not None and scope is not None:
                scope.check(session_id, owner.user_id, owner.tenant_id)
            root = None if owner is None else str(owner.root_session_id)
            if root is not None and root != session_id:
                raise NotRootSessionError(session_id, root)
            reason: UnknownReason = "no_session" if root is None else "no_pending_call"
            _log_unknown(session_id, tool_call_id, reason)
            return "unknown_tool_call", reason
        if scope is not None:
            scope.check(session_id, row.user_id, row.tenant_id)
        if row.status in ("submitted", "resolved"):
            return "already_completed", None
        if row.status == "cancelled":
            return "unknown_tool_call", "interrupted"
        if row.status == "closed":
            return "unknown_tool_call", "run_ended"
        _check_delivery(row, tool_call_id, delivery)
        if row.status == "timed_out":
            pending_rows.store_late_answer(conn, session_id, tool_call_id, payload)
            log.warning(
                "client_tool.late_answer",
                extra={"event": "client_tool.late_answer", "tool_call_id": tool_call_id},
            )
            return "late_answer_after_timeout", None
        if row.run_status in _dbos.ENDED:
            pending_rows.close_one(conn, session_id, tool_call_id, "run_ended")
            _log_unknown(session_id, tool_call_id, "run_ended")
            return "unknown_tool_call", "run_ended"
        pending_rows.mark_submitted(conn, session_id, tool_call_id, payload)
        client.send_in_transaction(
            conn,
            row.owner_workflow_id,
            with_context(payload),  # the submit's trace context: the wait's span links it
            topic=tool_call_id,
            idempotency_key=tool_call_id,
        )
    return "accepted", None


def _log_unknown(session_id: str, tool_call_id: str, reason: str) -> None:
    log.warning(
        "client_tool.submit_unknown",
        extra={
            "event": "client_tool.submit_unknown",
            "session_id": session_id,
            "tool_call_id": tool_call_id,
            "reason": reason,
        },
    )


def interrupt(
    engine: sa.Engine, client: DBOSClient, session_id: str, scope: Scope | None
) -> InterruptOutcome:
    """Interrupt a session tree, atomically (see the module doc); under a ``scope`` only
    a session in it (checked on the row the interrupt reads first)."""
    storable.check_id(session_id, "session_id")
    try:
        with engine.begin() as conn:
            owner = seen(scope, session_id, sessions.identity(conn, session_id))
            done = queries.interrupt_tree(conn, client, str(owner.root_session_id))
    except (SessionNotFoundError, AccessDeniedError):
        raise
    except Exception as exc:
        raise InterruptFailedError(session_id, str(exc)) from exc
    try:  # stock DBOS only: the cancel follows the commit; the runs are fenced already
        done.cancel()
    except Exception as exc:
        log.warning("workflow cancel after an interrupt failed", extra={"error": str(exc)})
    for w in done.waits:
        log.info(
            "client_tool.aborted",
            extra={"event": "client_tool.aborted", "tool_call_id": w.tool_call_id},
        )
    return InterruptOutcome(
        session_id=session_id,
        interrupted_sessions=[b.id for b in done.busy],
        cancelled_calls=[w.tool_call_id for w in done.waits],
    )
