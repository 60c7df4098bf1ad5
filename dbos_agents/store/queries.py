"""Reads and starting runs, for ``AgentRuntime`` and every out-of-worker caller.

Used by ``AgentRuntime`` and every out-of-worker caller. Starting or continuing a session
writes its row and enqueues the run's workflow in one transaction, so a caller that sees an
error knows nothing was started, and a caller that sees success knows the run is durable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from dbos import DBOSClient

from .. import _dbos, storable
from ..delivery import InterruptDelivery, encode
from ..errors import SessionBusyError, SessionNotFoundError
from ..ids import (
    INBOX_TOPIC,
    START_CHANNEL,
    WORKFLOW_NAME,
    agent_queue,
    new_session_id,
    run_workflow_id,
)
from ..outcome import RunSpec, SessionInfo
from ..records import PAGE_KEY, PageInput, with_page
from ..records import HistoryEntry as HistoryEntry
from ..records import ToolCallRecord as ToolCallRecord
from . import calls, durable, runs, sessions, transcript
from . import pending as pending_rows

BUSY = sessions.BUSY


def get_session(
    engine: sa.Engine, session_id: str, system_schema: str | None = None
) -> SessionInfo | None:
    """The session; with DBOS's ``system_schema`` a run cancelled outside us reads
    ``interrupted`` (``sessions.get``)."""
    return sessions.get(engine, session_id, system_schema)


class _CancelledOutside(Exception):
    """The session's run was cancelled in DBOS by someone else: reconcile, then retry."""

    def __init__(self, root_session_id: str) -> None:
        self.root_session_id = root_session_id


@dataclass(frozen=True)
class TreeInterrupt:
    """What ``interrupt_tree`` did: the sessions it interrupted (``id``, ``workflow_id``,
    ``run_seq``), the waits it cancelled (``owner_workflow_id``, ``tool_call_id``), and the
    workflows' cancel to call once the transaction has committed (stock DBOS)."""

    busy: list[sa.Row[Any]]
    waits: list[sa.Row[Any]]
    cancel: Callable[[], None]


def interrupt_tree(conn: sa.Connection, client: DBOSClient, root_session_id: str) -> TreeInterrupt:
    """An interrupt of the tree, in the caller's transaction: busy sessions ``interrupted``
    (their runs too), open waits cancelled and their workflows told, the tree's workflows
    (durable tools' included) cancelled (``AgentClient.interrupt`` and an operator's
    ``dbos workflow cancel``)."""
    busy = sessions.interrupt_tree(conn, root_session_id)
    runs.record_interrupted(conn, [(b.id, b.run_seq) for b in busy])
    waits = pending_rows.cancel_tree(conn, root_session_id)
    for w in waits:
        client.send_in_transaction(
            conn,
            w.owner_workflow_id,
            encode(InterruptDelivery()),
            topic=w.tool_call_id,
            idempotency_key=f"interrupt::{w.tool_call_id}",
        )
    tools = durable.interrupt(conn, [b.id for b in busy])  # their durable tools stop too
    cancel = _dbos.cancel_in_transaction(conn, client, [b.workflow_id for b in busy] + tools)
    return TreeInterrupt(busy, waits, cancel)


def interrupt_cancelled(engine: sa.Engine, client: DBOSClient, root_session_id: str) -> None:
    """Record what an operator's ``dbos workflow cancel`` did as an interrupt of the tree
    (``interrupt_tree``)."""
    with engine.begin() as conn:
        done = interrupt_tree(conn, client, root_session_id)
    done.cancel()


def history(engine: sa.Engine, session_id: str) -> list[HistoryEntry]:
    return transcript.history(engine, session_id)


def tool_calls(engine: sa.Engine, session_id: str) -> list[ToolCallRecord]:
    return calls.list_for_session(engine, session_id)


def enqueue_run(
    engine: sa.Engine,
    client: DBOSClient,
    queue_name: str,
    *,
    session_id: str,
    agent: str,
    message: str,
    user_id: str | None,
    tenant_id: str | None,
    new_session: bool,
    claim: Callable[[sa.Connection, str], bool] | None = None,
    system_schema: str | None = None,
    page: PageInput | None = None,
) -> tuple[RunSpec, str]:
    """Record a queued run and enqueue its workflow, atomically; returns (spec, workflow id).

    A new session gets its row; an existing one must not be busy, and gets ``run_seq + 1``.
    The user message travels in the workflow input and is stored by the run's first step,
    so it is written exactly once however the caller or the worker fail. A persistent
    session whose workflow waits on its inbox gets the message there instead (same
    transaction, same row lock as the workflow's idle-TTL check, so none is lost).
    ``claim`` (a worker starting the run itself) claims the enqueued workflow in the same
    transaction; when it does, no worker is told of the start.

    With DBOS's ``system_schema``, a session whose workflow an operator cancelled
    (``dbos workflow cancel``) is not busy: its tree is recorded interrupted first
    (``interrupt_cancelled``), and a persistent session's cancelled inbox workflow gets no
    message: the run starts a workflow of its own.
    """
    args = (engine, client, queue_name, session_id, agent, message, user_id, tenant_id)
    try:
        return _enqueue(*args, new_session, claim, system_schema, page)
    except _CancelledOutside as cancelled:
        interrupt_cancelled(engine, client, cancelled.root_session_id)
    return _enqueue(*args, new_session, claim, system_schema, page)


def _enqueue(
    engine: sa.Engine,
    client: DBOSClient,
    queue_name: str,
    session_id: str,
    agent: str,
    message: str,
    user_id: str | None,
    tenant_id: str | None,
    new_session: bool,
    claim: Callable[[sa.Connection, str], bool] | None,
    system_schema: str | None,
    page: PageInput | None = None,
) -> tuple[RunSpec, str]:
    inbox_workflow: str | None = None
    with engine.begin() as conn:
        if new_session:
            run_seq = 1
            sessions.insert_queued(conn, session_id, agent, user_id, tenant_id)
            root, parent = session_id, None
        else:
            row = sessions.lock(conn, session_id, system_schema)
            if row is None:
                raise SessionNotFoundError(session_id)
            if row.status in BUSY and row.wf_cancelled:
                raise _CancelledOutside(row.root_session_id)
            if row.status in BUSY:
                raise SessionBusyError(session_id, row.status)
            run_seq = row.run_seq + 1
            agent, user_id, tenant_id = row.agent, row.user_id, row.tenant_id
            root, parent = row.root_session_id, row.parent_session_id
            inbox_workflow = row.workflow_id if row.inbox_open and not row.wf_cancelled else None
            sessions.requeue(
                conn, session_id, run_seq, inbox_workflow or run_workflow_id(session_id, run_seq)
            )
        spec = RunSpec(
            session_id=session_id,
            root_session_id=root,
            parent_session_id=parent,
            agent=agent,
            run_seq=run_seq,
            message=message,
            user_id=user_id,
            tenant_id=tenant_id,
        )
        spec = with_page(spec, page)  # a chat page's tools, context, state (records.PageInput)
        if inbox_workflow is not None:
            client.send_in_transaction(
                conn,
                inbox_workflow,
                {"run_seq": run_seq, "message": message, PAGE_KEY: page or None},
                topic=INBOX_TOPIC,
                idempotency_key=f"inbox::{run_seq}",
            )
        else:
            queue = agent_queue(queue_name, agent)  # only workers running the agent take it
            client.enqueue_in_transaction(
                conn,
                {
                    "queue_name": queue,
                    "workflow_name": WORKFLOW_NAME,
                    "workflow_id": run_workflow_id(session_id, run_seq),
                },
                spec,
            )
            if claim is None or not claim(conn, run_workflow_id(session_id, run_seq)):
                # Delivered at commit: workers claim the run now, not at their next poll.
                conn.execute(sa.text("SELECT pg_notify(:c, :q)"), {"c": START_CHANNEL, "q": queue})
    return spec, inbox_workflow or run_workflow_id(session_id, run_seq)


def start_run(
    engine: sa.Engine,
    client: DBOSClient,
    queue_name: str,
    *,
    agent: str,
    message: str,
    session_id: str | None,
    user_id: str | None,
    tenant_id: str | None,
    claim: Callable[[sa.Connection, str], bool] | None = None,
    system_schema: str | None = None,
    page: PageInput | None = None,
) -> tuple[RunSpec, str]:
    """Start a new session, or continue ``session_id`` when it exists (see ``enqueue_run``).
    Every caller-supplied value is checked first: ``InvalidRequestError``, nothing written."""
    storable.check_id(agent, "agent")
    storable.check_text(message, "message")
    storable.check_optional_id(session_id, "session_id")
    storable.check_optional_id(user_id, "user_id")
    storable.check_optional_id(tenant_id, "tenant_id")
    sid = session_id or new_session_id()
    exists = session_id is not None and get_session(engine, sid) is not None
    return enqueue_run(
        engine,
        client,
        queue_name,
        session_id=sid,
        agent=agent,
        message=message,
        user_id=user_id,
        tenant_id=tenant_id,
        new_session=not exists,
        claim=claim,
        system_schema=system_schema,
        page=page,
    )
