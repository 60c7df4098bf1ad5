"""The fast paths' shared DBOS internals (with ``parking`` for parked waits, ``replay``
for replays, ``starts`` for local starts, ``recovery`` for recovery's re-enqueue, ``recv``
and ``send``); the facade (``__init__``) is what the rest of the package calls.

DBOS 3.4 has no public API for a few things operations need. Each function here names the
private DBOS object it relies on; behaviour tests against real DBOS fail when a
DBOS upgrade moves or renames one, so an upgrade is a one-file review.

- ``system_schema``: a submit reads whether the run it would wake has ended with its lock
  on the wait (``store/pending.row_for_submit``: DBOS's ``workflow_status``, by name).
- ``cancel_workflows_in_transaction``: DBOS cancels a workflow in its own transaction
  (``SystemDatabase.cancel_workflows``); an interrupt must cancel in *ours*, so the session
  row, the pending rows and the cancellation commit together or not at all. Uses
  ``DBOSClient._sys_db.tables.workflow_status`` and mirrors the columns DBOS resets.
- Worker operations (``stop_dequeuing``, ``checkpointed_steps``, ``ended_workflows``,
  ``catch_up_waiters``, ``batch_fallback_rechecks``, ``listener_connection``): drain on
  SIGTERM, adopt a dead worker's sessions (re-enqueued by ``recovery``), and wake
  waiters whose notification was lost (in a LISTEN reconnect or otherwise) with one query
  for all of them, instead of DBOS's query per waiter.
- ``dequeue_now``: one pass of DBOS's queue claim, run when a start is announced, so a
  new run does not wait for the queue thread's next poll (DBOS has no wake-up for it).
- ``outside_workflow``: run a server tool's handler with DBOS's context variable cleared
  (``dbos._context._dbos_context_var``): a server tool call is not a DBOS step, and
  DBOS calls made by a handler must not become operations of the workflow.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import sqlalchemy as sa
from dbos import DBOSClient
from dbos._sys_db import WorkflowStatusString
from sqlalchemy.dialects.postgresql import ARRAY

FINISHED = (WorkflowStatusString.SUCCESS.value, WorkflowStatusString.ERROR.value)
T = TypeVar("T")


async def outside_workflow(coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro`` in a task whose context has no DBOS workflow context (a handler's
    DBOS calls then act as outside any workflow); cancelling the caller cancels it."""
    from dbos._context import _dbos_context_var

    ctx = contextvars.copy_context()
    ctx.run(_dbos_context_var.set, None)
    task = asyncio.get_running_loop().create_task(coro, context=ctx)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        task.cancel()
        raise


def workflow_status_table(client: DBOSClient) -> sa.Table:
    """DBOS's ``workflow_status`` table object (its schema is a placeholder that
    ``bind_system_schema`` translates on the caller's connection)."""
    table: sa.Table = client._sys_db.tables.workflow_status
    return table


def bind_system_schema(conn: sa.Connection, client: DBOSClient) -> None:
    """Let DBOS table objects resolve to the system schema on the caller's connection
    (``SystemDatabase._apply_caller_schema``, as ``send_in_transaction`` does)."""
    client._sys_db._apply_caller_schema(conn)


def cancel_workflows_in_transaction(
    conn: sa.Connection,
    client: DBOSClient,
    workflow_ids: list[str],
    *,
    with_descendants: bool = False,
) -> list[str]:
    """Cancel the given workflows inside the caller's transaction, exactly as
    ``DBOS.cancel_workflow`` does (status CANCELLED, off its queue, ownership token
    cleared), unless already finished. ``with_descendants`` also cancels the sub-agent
    workflows under them (ids ``{parent}::sub::...``, started or only enqueued). Returns the
    ids it cancelled."""
    if not workflow_ids:
        return []
    ws = workflow_status_table(client)
    bind_system_schema(conn, client)
    now_ms = sa.cast(sa.func.extract("epoch", sa.func.now()) * 1000, sa.BigInteger)
    rows = conn.execute(
        sa.update(ws)
        .where(_selected(ws, workflow_ids, with_descendants))
        .where(ws.c.status.notin_(FINISHED))
        .values(
            status=WorkflowStatusString.CANCELLED.value,
            owner_xid=None,
            queue_name=None,
            deduplication_id=None,
            started_at_epoch_ms=None,
            updated_at=now_ms,
            completed_at=now_ms,
        )
        .returning(ws.c.workflow_uuid)
    ).all()
    return [r[0] for r in rows]


def _selected(ws: sa.Table, ids: list[str], with_descendants: bool) -> sa.ColumnElement[bool]:
    if not with_descendants:
        return ws.c.workflow_uuid.in_(ids)
    # A prefix match without LIKE: ids may contain LIKE's wildcards.
    return sa.or_(
        ws.c.workflow_uuid.in_(ids),
        *(
            sa.func.left(ws.c.workflow_uuid, len(prefix)) == prefix
            for prefix in (f"{i}::sub::" for i in ids)
        ),
    )


ENDED = (
    WorkflowStatusString.SUCCESS.value,
    WorkflowStatusString.ERROR.value,
    WorkflowStatusString.CANCELLED.value,
    WorkflowStatusString.MAX_RECOVERY_ATTEMPTS_EXCEEDED.value,
)
"""DBOS statuses of a workflow that will never read another message."""


def system_schema(client: DBOSClient) -> str:
    """The schema of DBOS's system tables (``SystemDatabase.schema``), for our own SQL
    that joins them."""
    return str(client._sys_db.schema)


# ---------------------------------------------------------------------------------------
# Worker operations: drain, adoption, lost wake-ups (see docs/operations.md).
# Private names used below: DBOS instance ``background_thread_stop_events``, ``_sys_db``,
# SystemDatabase ``engine``, ``tables`` (tables
# ``operation_outputs``, ``notifications``, ``workflow_events``), ``notifications_map``,
# ``workflow_events_map`` (``ThreadSafeEventDict.snapshot`` -> (key, components, signal)),
# PostgresSystemDatabase ``notification_conn`` and ``_listener_thread_lock``.
# ---------------------------------------------------------------------------------------

StepKey = tuple[str, int]


def _instance() -> Any:
    from dbos._dbos import _get_dbos_instance

    return _get_dbos_instance()


def _system_database() -> Any:
    return _instance()._sys_db


def quoted(schema: str) -> str:
    """A schema name as a quoted identifier, for our plain SQL on DBOS's tables (its
    schema is configurable, so it may need quoting)."""
    return '"' + schema.replace('"', '""') + '"'


def quoted_system_schema() -> str:
    """The launched system database's schema, quoted (``SystemDatabase.schema``)."""
    return quoted(str(_system_database().schema))


def sharded(sys_db: Any) -> bool:
    """Whether the system database addresses workflow rows by shard key
    (``SystemDatabase._key_column``): our own statements on ``workflow_status`` do not, so
    there DBOS's per-workflow paths are kept."""
    return sys_db._key_column(sys_db.tables.workflow_status) is not None


def replace_on_system_database(name: str, build: Callable[[Any, Any], Any]) -> None:
    """Replace the launched system database's method ``name`` with ``build(sys_db,
    original)``, once (a second call is a no-op); a sharded system database addresses rows
    by shard key, which our replacements do not, so it keeps DBOS's own (``_key_column``)."""
    sys_db = _system_database()
    original = getattr(sys_db, name)
    if getattr(original, "_dbos_agents", False):
        return
    if sys_db._key_column(sys_db.tables.operation_outputs, "child_shard_key") is not None:
        return
    replacement = build(sys_db, original)
    replacement._dbos_agents = True
    setattr(sys_db, name, replacement)


def stop_dequeuing() -> int:
    """Stop DBOS's queue threads (every queue, the internal recovery queue included), its
    scheduler, pollers and startup recovery, while steps, recv and the notification listener
    keep working. DBOS has no public call for this: ``DBOS.destroy`` does it first, then
    tears down the event loop the draining workflows still run on. Returns the events set."""
    events = list(_instance().background_thread_stop_events)
    for evt in events:
        evt.set()
    return len(events)


def checkpointed_steps(keys: set[StepKey]) -> set[StepKey]:
    """Those of ``keys`` (workflow id, step id) whose output DBOS has recorded."""
    if not keys:
        return set()
    sys_db = _system_database()
    oo: sa.Table = sys_db.tables.operation_outputs
    workflows = sorted({wf for wf, _ in keys})
    with sys_db.engine.connect() as conn:
        rows = conn.execute(
            sa.select(oo.c.workflow_uuid, oo.c.function_id).where(oo.c.workflow_uuid.in_(workflows))
        ).all()
    return {(str(r[0]), int(r[1])) for r in rows} & keys


def ended_workflows(workflow_ids: set[str]) -> set[str]:
    """Those of ``workflow_ids`` that DBOS no longer records as running (PENDING or
    ENQUEUED): their end is written."""
    if not workflow_ids:
        return set()
    sys_db = _system_database()
    ws: sa.Table = sys_db.tables.workflow_status
    with sys_db.engine.connect() as conn:
        rows = conn.execute(
            sa.select(ws.c.workflow_uuid)
            .where(ws.c.workflow_uuid.in_(sorted(workflow_ids)))
            .where(
                ws.c.status.notin_(
                    [WorkflowStatusString.PENDING.value, WorkflowStatusString.ENQUEUED.value]
                )
            )
        ).all()
    return {str(r[0]) for r in rows}


def catch_up_waiters() -> int:
    """Wake every local ``recv``/``get_event`` waiter whose message or event is already in
    the database; returns how many were woken. Only waiters with something to read are
    woken: a woken ``recv`` consumes at once, and with nothing there it would return None
    before its deadline (a false timeout)."""
    sys_db = _system_database()
    n: sa.Table = sys_db.tables.notifications
    we: sa.Table = sys_db.tables.workflow_events
    return _wake_present(
        sys_db.engine,
        sys_db.notifications_map.snapshot(),
        lambda ids: unread_topics(n, ids),
    ) + _wake_present(
        sys_db.engine,
        sys_db.workflow_events_map.snapshot(),
        lambda ids: sa.select(we.c.workflow_uuid, we.c.key).where(
            we.c.workflow_uuid == _any_of(ids)
        ),
    )


def unread_topics(notifications: sa.Table, workflow_ids: list[str]) -> sa.Select[Any]:
    """(workflow id, topic) of every unconsumed message to ``workflow_ids``."""
    n = notifications
    return (
        sa.select(n.c.destination_uuid, n.c.topic)
        .where(n.c.destination_uuid == _any_of(workflow_ids))
        .where(n.c.consumed.is_(False))
        .distinct()
    )


def _any_of(ids: list[str]) -> sa.ColumnElement[Any]:
    """``= ANY(:ids)`` with the ids as one array parameter: an ``IN`` list renders a bind
    parameter per id, and with 100,000 waiting sessions building and parsing that statement
    took seconds of the worker's CPU at every re-check."""
    return sa.any_(sa.bindparam("ids", ids, type_=ARRAY(sa.Text)))


def _wake_present(
    engine: sa.Engine, waiters: Any, present: Callable[[list[str]], sa.Select[Any]]
) -> int:
    """Set the signal of each waiter keyed (workflow id, topic or key, ...) whose pair the
    ``present`` query (given the waiters' workflow ids) finds in the database."""
    if not waiters:
        return 0
    with engine.connect() as conn:
        rows = conn.execute(present(sorted({c[0] for _, c, _ in waiters}))).all()
    have = {(str(r[0]), str(r[1])) for r in rows}
    woken = 0
    for _, (wf, topic, _), signal in waiters:
        if (wf, topic) in have:
            signal.set()
            woken += 1
    return woken


BATCHED_RECHECK_SEC = 10.0**9
"""DBOS's per-waiter fallback interval once ``ListenerWatch`` re-checks all waiters at once."""


def batch_fallback_rechecks() -> None:
    """Stop DBOS from re-checking each waiting ``recv``/``get_event`` on its own
    (``SystemDatabase._notification_fallback_polling_interval``, 60 s, one query and one
    thread hop per waiter); ``ListenerWatch`` runs ``catch_up_waiters`` for all of them
    instead. Deadlines are unaffected: a wait's timeout is the smaller of the two."""
    _system_database()._notification_fallback_polling_interval = BATCHED_RECHECK_SEC


def listener_connection() -> tuple[object | None, threading.Lock]:
    """DBOS's LISTEN connection object (a new object at every reconnect) and the lock its
    listener holds while connecting and issuing LISTEN."""
    sys_db = _system_database()
    lock: threading.Lock = sys_db._listener_thread_lock
    return getattr(sys_db, "notification_conn", None), lock


_QUEUE_CONFIG_TTL_SEC = 1.0
_queue_configs: dict[str, tuple[float, Any]] = {}


def _queue_config(sys_db: Any, queue_name: str) -> Any:
    """The queue's database-backed configuration (``SystemDatabase.get_queue``), re-read
    at most once a second: a round trip per start otherwise, for a row that rarely changes."""
    now = time.monotonic()
    cached = _queue_configs.get(queue_name)
    if cached is not None and now - cached[0] < _QUEUE_CONFIG_TTL_SEC:
        return cached[1]
    queue = sys_db.get_queue(queue_name)
    _queue_configs[queue_name] = (now, queue)
    return queue


def claims_without_limits(queue_name: str) -> bool:
    """Whether a claim outside DBOS's queue thread may start ``queue_name``'s workflows:
    a queue with any concurrency or rate limit is left to that thread, which counts this
    worker's running workflows once per poll (a second claimer would race that count)."""
    return _without_limits(_queue_config(_system_database(), queue_name))


def _without_limits(queue: Any) -> bool:
    if queue is None or queue._has_partition_limits() or queue._limiter is not None:
        return False
    return queue._concurrency is None and queue._worker_concurrency is None


_LATEST_TTL_SEC = 1.0
_latest: list[tuple[float, bool]] = []


def is_latest_version(sys_db: Any, version: str) -> bool:
    """Whether ``version`` is DBOS's latest application version (only that one takes
    version-less workflows), read at most once a second like the queue's configuration
    rather than once per claim."""
    now = time.monotonic()
    if not _latest or now - _latest[0][0] >= _LATEST_TTL_SEC:
        _latest[:] = [(now, bool(sys_db._is_latest_version(version)))]
    return _latest[0][1]


def dequeue_now(queue_name: str) -> int:
    """Claim and start this worker's share of ``queue_name``'s enqueued workflows now,
    exactly as one poll of DBOS's queue thread does for a queue without global limits
    (``SystemDatabase.start_queued_workflows`` with this worker's running count, then
    ``execute_dequeued_workflow`` on each claim; the claim skips rows another claimer holds,
    so this and the queue thread never start the same workflow). Returns how many started
    (none on a queue with limits: ``claims_without_limits``)."""
    from dbos._core import execute_dequeued_workflow
    from dbos._dbos import _get_dbos_instance
    from dbos._utils import GlobalParams, generate_uuid

    dbos = _get_dbos_instance()
    sys_db = dbos._sys_db
    queue = _queue_config(sys_db, queue_name)
    if not _without_limits(queue):
        return 0
    owner_xid = generate_uuid()
    # The local running count only matters under a worker concurrency limit (left to the
    # queue thread above); counting it walks every active workflow, 100,000 when parked.
    version = GlobalParams.app_version
    claimed, _ = sys_db.start_queued_workflows(
        queue,
        GlobalParams.executor_id,
        version,
        None,
        0,
        owner_xid=owner_xid,
        is_latest_version=is_latest_version(sys_db, version),
    )
    if not claimed:
        return 0
    statuses = {s["workflow_uuid"]: s for s in sys_db.get_workflow_statuses(claimed)}
    for wf in claimed:
        status = statuses.get(wf) or sys_db.get_workflow_status(wf)
        if status is not None:
            execute_dequeued_workflow(dbos, status, owner_xid)
    return len(claimed)
