"""Everything dbos-agents does with DBOS beyond its public API, behind one facade.

The rest of the package imports this module only (``from .. import _dbos``), never a
submodule, and no other module imports a private ``dbos._*`` name. Each operation below
has two implementations: the **fast path** (our replacement of a DBOS internal path, or a
use of a DBOS internal that has no public equivalent) and the **stock** one (DBOS's public
API; slower, or the feature is off). ``configure`` picks one per process from
``Settings.dbos_fast_paths`` and checks the installed dbos release against ``REVIEWED``.
Both keep the session workflow's DBOS operation sequence identical, so a worker may restart
in the other mode with runs in flight.

| operation | fast path (module) | stock |
|---|---|---|
| ``before_launch`` / ``after_launch`` | chunked recovery (``recovery``); one-read replay checks (``replay``); one-statement ``recv`` (``recv``); batched wake-up re-checks | nothing |
| ``outside_workflow`` | DBOS's context variable cleared | an empty context |
| ``enter_workflow`` | the replay snapshot a parked resume's claim read | no snapshot |
| ``local_start`` / ``dequeue_now`` | a start claimed in its own transaction (``starts``); an announced start claimed at once | the queue's poll |
| ``can_send_in_statement`` | a submit's message inserted by its own statement (``send``) | ``DBOSClient.send_in_transaction`` |
| ``cancel_in_transaction`` | the cancel commits with the interrupt | ``DBOSClient.cancel_workflow`` after the commit (our fences stop the run anyway) |
| ``stop_dequeuing`` | DBOS's queue threads stopped for a drain | none: a run dequeued while draining parks at its first step |
| ``checkpointed_steps``, ``ended_workflows`` | one query each | ``DBOS.list_workflow_steps``, ``DBOS.list_workflows`` |
| ``hand_back`` | a claimed workflow returned to its agent's queue, unrun (``handback``) | the same (no public equivalent) |
| ``owner_token`` | the ownership token this execution's claim wrote (live pieces are fenced on it) | the same (no public equivalent) |
| ``recover_pending_workflows`` | re-enqueue in chunks (``recovery``) | ``DBOS.list_workflows`` + ``DBOS.resume_workflows`` |
| parking (``park_*``), lost wake-ups (``catch_up_waiters``, ``listener_connection``) | ``parking``, ``internals`` | not used: waits stay in memory; DBOS re-checks each waiter |

Statuses and the system schema's quoting (``ENDED``, ``FINISHED``, ``quoted``) are DBOS's
public names and documented tables, shared by our SQL.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar

import sqlalchemy as sa
from dbos import DBOS, DBOSClient, WorkflowStatusString

from . import internals, version

log = logging.getLogger("dbos_agents")
T = TypeVar("T")

REVIEWED = version.REVIEWED
"""The dbos releases whose internals the fast paths were reviewed against."""

FINISHED = (WorkflowStatusString.SUCCESS.value, WorkflowStatusString.ERROR.value)
ENDED = (
    *FINISHED,
    WorkflowStatusString.CANCELLED.value,
    WorkflowStatusString.MAX_RECOVERY_ATTEMPTS_EXCEEDED.value,
)
"""DBOS statuses of a workflow that will never read another message."""
_RUNNING = (WorkflowStatusString.PENDING.value, WorkflowStatusString.ENQUEUED.value)

_fast = True


def configure(*, fast_paths: bool) -> None:
    """Choose this process's implementation (``Settings.dbos_fast_paths``) and check the
    installed dbos release: ``UnsupportedDBOSError`` for an unreviewed one with fast
    paths, a warning without."""
    version.check(fast_paths=fast_paths)
    global _fast
    _fast = fast_paths


def fast_paths() -> bool:
    return _fast


def quoted(schema: str) -> str:
    """A schema name as a quoted identifier, for our SQL on DBOS's tables."""
    return internals.quoted(schema)


# --- launch ---------------------------------------------------------------------------------


def before_launch() -> None:
    """Before ``DBOS.launch()``: this worker's pending runs re-enqueued in chunks."""
    if _fast:
        from . import recovery

        recovery.install()


def after_launch() -> None:
    """After ``DBOS.launch()``: replays read their records at once, a woken ``recv``
    consumes in one statement, waiters are re-checked in one query (``ListenerWatch``)."""
    if _fast:
        from . import recv, replay

        replay.install()
        recv.install()
        internals.batch_fallback_rechecks()


# --- inside the workflow --------------------------------------------------------------------


async def outside_workflow(coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro`` (a tool handler, a model call) where DBOS sees no workflow, so the
    DBOS calls it makes are not operations of the session's workflow."""
    if _fast:
        return await internals.outside_workflow(coro)
    task = asyncio.get_running_loop().create_task(coro, context=contextvars.Context())
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        task.cancel()
        raise


def enter_workflow(workflow_id: str) -> bool:
    """As a session workflow's execution begins; True when it resumes a parked wait."""
    if not _fast:
        return False
    from . import replay

    return replay.enter_workflow(workflow_id)


# --- starts ---------------------------------------------------------------------------------


class LocalStart(Protocol):
    status: dict[str, Any] | None

    def claim(self, conn: sa.Connection, workflow_id: str) -> bool: ...

    def execute(self) -> None: ...


def local_start(queue_name: str) -> LocalStart | None:
    """A claim for a start this worker makes, or None: the queue claims it."""
    if not _fast:
        return None
    from . import starts

    return starts.local_start(queue_name)


def dequeue_now(queue_name: str) -> int:
    """One claim pass of DBOS's queue, when a start is announced (0: left to the poll)."""
    return internals.dequeue_now(queue_name) if _fast else 0


async def hand_back(workflow_id: str, queue_name: str) -> bool:
    """Return the workflow this execution owns to ``queue_name``, unrun (a worker that
    lacks its agent; ``handback``); the caller's task then ends cancelled. Both modes:
    DBOS has no public call for it."""
    from . import handback

    return await handback.hand_back(workflow_id, queue_name)


# --- submits and interrupts -----------------------------------------------------------------


def can_send_in_statement(client: DBOSClient) -> bool:
    """Whether a submit may insert its message in its own statement (``send_from_sql``)."""
    if not _fast:
        return False
    from . import send

    return send.one_statement_possible(client)


def send_from_sql(client: DBOSClient, source: str, destination: str) -> str:
    """SQL sending one message per row of the CTE ``source`` to its ``destination``
    column's workflow, as ``send`` with an idempotency key (``send_params``)."""
    from . import send

    return send.insert_from(client, source, destination)


def send_params(client: DBOSClient, message: Any, topic: str, key: str) -> dict[str, Any]:
    from . import send

    return send.message_params(client, message, topic, key)


def cancel_in_transaction(
    conn: sa.Connection, client: DBOSClient, workflow_ids: list[str]
) -> Callable[[], None]:
    """Cancel ``workflow_ids`` and their sub-agents' workflows with the caller's
    transaction; returns what to run after it commits (the stock cancel)."""
    if _fast:
        internals.cancel_workflows_in_transaction(conn, client, workflow_ids, with_descendants=True)
        return lambda: None

    def after_commit() -> None:
        for wf in workflow_ids:
            client.cancel_workflow(wf, cancel_children=True)

    return after_commit


# --- worker operations ----------------------------------------------------------------------

StepKey = tuple[str, int]


def stop_dequeuing() -> int:
    """Stop DBOS's queue threads for a drain (stock: none; see the table above)."""
    return internals.stop_dequeuing() if _fast else 0


def checkpointed_steps(keys: set[StepKey]) -> set[StepKey]:
    """Those of ``keys`` (workflow id, step id) whose output DBOS has recorded."""
    if _fast or not keys:
        return internals.checkpointed_steps(keys)
    recorded = {
        (wf, s["function_id"])
        for wf in {k[0] for k in keys}
        for s in DBOS.list_workflow_steps(wf, load_output=False)
    }
    return recorded & keys


def ended_workflows(workflow_ids: set[str]) -> set[str]:
    """Those of ``workflow_ids`` that DBOS no longer records as running."""
    if _fast or not workflow_ids:
        return internals.ended_workflows(workflow_ids)
    found = DBOS.list_workflows(
        workflow_ids=sorted(workflow_ids), load_input=False, load_output=False
    )
    return {w.workflow_id for w in found if w.status not in _RUNNING}


def recover_pending_workflows(executor_ids: list[str], app_version: str) -> list[str]:
    """Put the PENDING runs of dead ``executor_ids`` back on a queue (adoption)."""
    if _fast:
        from . import recovery

        return recovery.recover_pending_workflows(executor_ids)
    ids = [
        w.workflow_id
        for w in DBOS.list_workflows(
            status=WorkflowStatusString.PENDING.value,
            executor_id=executor_ids,
            app_version=app_version,
            load_input=False,
            load_output=False,
        )
    ]
    if ids:
        DBOS.resume_workflows(ids)
    return ids


def catch_up_waiters() -> int:
    """Wake this process's waiters whose message is already in the database."""
    return internals.catch_up_waiters() if _fast else 0


def listener_connection() -> tuple[object | None, threading.Lock]:
    """DBOS's LISTEN connection object (new at every reconnect) and its lock."""
    return internals.listener_connection()


def owner_token(workflow_id: str) -> str | None:
    """The ownership token of this execution of ``workflow_id``, which DBOS wrote to the
    workflow's status row when it claimed it (on every path: a queue's claim, a direct
    start, a recovery, our fast claims); None outside the workflow's context. A writer
    that checks it in the same statement as its write stops once the run is adopted."""
    from . import parking

    try:
        return parking.owner_xid(workflow_id)
    except AssertionError:  # a context without a token: nothing to fence on
        return None


# --- parked waits (fast paths only; ``worker.parking``) -------------------------------------


def park_owner(workflow_id: str) -> str | None:
    from . import parking

    return parking.owner_xid(workflow_id)


def park_waiting_unwoken(workflow_id: str, topic: str) -> bool:
    from . import parking

    return parking.waiting_unwoken(workflow_id, topic)


def park_replace_waiters(workflow_id: str, topic: str, wake: Any) -> None:
    from . import parking

    parking.replace_waiters(workflow_id, topic, wake)


def park_remove_waiter(workflow_id: str, topic: str, wake: Any) -> None:
    from . import parking

    parking.remove_waiter(workflow_id, topic, wake)


def park_wake_times(workflow_ids: list[str]) -> dict[str, float]:
    from . import parking

    return parking.recorded_wake_times(workflow_ids)


def park_unread(waits: list[tuple[str, str]]) -> list[tuple[str, str]]:
    from . import parking

    return parking.unread_messages(waits)


def park_claim(claims: list[tuple[str, str | None, str]]) -> dict[str, Any]:
    from . import parking

    return parking.claim_parked(claims)


def park_execute(claimed: Any, token: str) -> None:
    from . import parking

    parking.execute_claimed(claimed, token)
