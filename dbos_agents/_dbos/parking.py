"""The DBOS internals that parking a wait uses (``worker/parking.py``), beside
``internals`` (behaviour: ``tests/integration/test_parking.py``).

Private names used: ``SystemDatabase._waiter`` (a waiter's key in the map and its
components), ``notifications_map`` (``ThreadSafeEventDict.get/add/pop``, ``KeySignal``'s
``_waiters``), the tables ``workflow_status`` (with the keys of DBOS's
``WorkflowStatusInternal``, read back by the resume's claim), ``workflow_input``,
``notifications`` and ``operation_outputs``, ``engine``, ``_key_column`` with
``get_workflow_statuses`` (a sharded database), ``serializer`` with ``dbos._serialization.deserialize_value`` (a
recorded sleep's end), ``dbos._context.current_owner_xid``, ``dbos._core.
execute_dequeued_workflow`` and ``dbos._utils.GlobalParams``/``generate_uuid``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from dbos._sys_db import WorkflowStatusString

from . import replay
from .internals import (
    _any_of,
    _instance,
    _system_database,
    quoted_system_schema,
    sharded,
    unread_topics,
)
from .replay import Recorded


def owner_xid(workflow_id: str) -> str | None:
    """The ownership token of this execution of ``workflow_id`` (DBOS writes a checkpoint
    only while the row still holds it)."""
    from dbos._context import current_owner_xid

    return current_owner_xid(workflow_id)


def _signal(workflow_id: str, topic: str) -> tuple[Any, str, Any, Any]:
    sys_db = _system_database()
    key, components = sys_db._waiter(workflow_id, topic)
    m = sys_db.notifications_map
    return m, key, components, m.get(key)


def waiting_unwoken(workflow_id: str, topic: str) -> bool:
    """A ``recv`` of ``workflow_id`` on ``topic`` is registered and nothing woke it yet."""
    _, _, _, signal = _signal(workflow_id, topic)
    if signal is None:
        return False
    with signal._lock:
        waiters = list(signal._waiters)
    return bool(waiters) and not any(w.is_set() for w in waiters)


def replace_waiters(workflow_id: str, topic: str, wake: Any) -> None:
    """Make ``wake`` (anything with ``set()``/``is_set()``) the only waiter on the topic:
    the listener and the catch-up re-check then call ``wake.set()``."""
    m, key, components, signal = _signal(workflow_id, topic)
    if signal is not None:
        with signal._lock:
            stale = list(signal._waiters)
        for w in stale:
            m.pop(key, w)
    m.add(key, wake, components)


def remove_waiter(workflow_id: str, topic: str, wake: Any) -> None:
    m, key, _, signal = _signal(workflow_id, topic)
    if signal is not None:
        m.pop(key, wake)


def unread_messages(waits: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Those (workflow id, topic) pairs with an unconsumed message."""
    if not waits:
        return []
    sys_db = _system_database()
    ids = sorted({wf for wf, _ in waits})
    with sys_db.engine.connect() as conn:
        rows = conn.execute(unread_topics(sys_db.tables.notifications, ids)).all()
    have = {(str(r[0]), str(r[1])) for r in rows}
    return [w for w in waits if w in have]


def recorded_wake_times(workflow_ids: list[str]) -> dict[str, float]:
    """Each workflow's latest durable sleep end (epoch seconds): the timeout its waiting
    ``recv`` recorded (``SystemDatabase.record_sleep``)."""
    from dbos._serialization import deserialize_value

    sys_db = _system_database()
    oo: sa.Table = sys_db.tables.operation_outputs
    with sys_db.engine.connect() as conn:
        rows = conn.execute(
            sa.select(oo.c.workflow_uuid, oo.c.output, oo.c.serialization)
            .where(oo.c.workflow_uuid == _any_of(sorted(set(workflow_ids))))
            .where(oo.c.function_name == "DBOS.sleep")
            .order_by(oo.c.function_id)
        ).all()
    latest = {str(wf): (output, serialization) for wf, output, serialization in rows}
    out: dict[str, float] = {}
    for wf, (output, serialization) in latest.items():
        end = deserialize_value(output, serialization, sys_db.serializer)
        if isinstance(end, int | float):
            out[wf] = float(end)
    return out


# DBOS's WorkflowStatusInternal, key by key as ``SystemDatabase.get_workflow_statuses`` reads
# it (test_local_start compares a claim's status with DBOS's read); ``shard_key`` is
# added in Python.
# fmt: off
_STATUS_KEYS = [
    "workflow_uuid", "status", "name", "recovery_attempts", "config_name", "class_name",
    "authenticated_user", "authenticated_roles", "assumed_role", "queue_name", "executor_id",
    "created_at", "updated_at", "app_version", "app_id", "workflow_deadline_epoch_ms",
    "workflow_timeout_ms", "deduplication_id", "priority", "inputs", "queue_partition_key",
    "forked_from", "parent_workflow_id", "started_at_epoch_ms", "serialization",
    "delay_until_epoch_ms", "attributes", "schedule_name", "debounce_deadline_epoch_ms",
    "is_debounced", "application_name",
]
# fmt: on
_COLUMN = {"app_version": "application_version", "app_id": "application_id"}
_SQL = {
    "inputs": "coalesce((SELECT wi.inputs FROM {schema}.workflow_input AS wi"
    " WHERE wi.workflow_uuid = ws.workflow_uuid), ws.inputs)"
}
_STATUS = tuple(
    (key, _COLUMN.get(key, key), _SQL.get(key, f"ws.{_COLUMN.get(key, key)}"))
    for key in _STATUS_KEYS
)
"""(status key, workflow_status column typing it, SQL expression)."""
STATUS_COLUMNS = ", ".join(f"{expr} AS {key}" for key, _, expr in _STATUS)
"""DBOS's status of the row ``ws`` in a claim's ``RETURNING`` (``status_of`` reads it)."""
NOW_MS = "CAST(extract(epoch FROM now()) * 1000 AS bigint)"
"""The database clock in DBOS's epoch milliseconds, as DBOS's own updates set it."""
_CLAIM = (
    "UPDATE {schema}.workflow_status AS ws SET owner_xid = v.token,"
    f" updated_at = {NOW_MS}"
    " FROM unnest(CAST(:wfs AS text[]), CAST(:olds AS text[]), CAST(:tokens AS text[]))"
    " AS v(wf, old, token) WHERE ws.workflow_uuid = v.wf AND ws.status = :pending"
    " AND ws.executor_id = :executor"
    " AND (ws.owner_xid IS NOT DISTINCT FROM v.old OR ws.owner_xid = v.token)"
    f" RETURNING {STATUS_COLUMNS},"
    # What the resumed execution reads first, read with the claim (``replay.seed``):
    # its recorded operations and the topics with a message waiting.
    " (SELECT json_agg(json_build_array(oo.function_id, oo.output, oo.error,"
    " oo.function_name, oo.child_workflow_id, oo.serialization) ORDER BY oo.function_id)"
    " FROM {schema}.operation_outputs AS oo WHERE oo.workflow_uuid = ws.workflow_uuid)"
    " AS recorded, (SELECT array_agg(DISTINCT n.topic) FROM {schema}.notifications AS n"
    " WHERE n.destination_uuid = ws.workflow_uuid AND n.consumed = false) AS unread"
)


@dataclass(slots=True)
class Claimed:
    """A parked workflow this worker claimed, with what the claim read for its resume."""

    status: Any
    """DBOS's ``WorkflowStatusInternal``, for ``execute_dequeued_workflow``."""
    recorded: Recorded | None
    """Its recorded operations (None: not read with the claim, on a sharded database)."""
    unread: set[str]
    """Topics with a message for it."""


_statements: dict[tuple[str, str], sa.TextualSelect] = {}


def status_stmt(sys_db: Any, template: str) -> sa.TextualSelect:
    """A claim returning DBOS's status (``template`` with ``{schema}``), compiled once per
    schema, its columns typed as DBOS's table types them (so each value converts as DBOS's
    own read converts it). Also ``starts``'s claim of a worker's own start."""
    schema = quoted_system_schema()
    stmt = _statements.get((template, schema))
    if stmt is None:
        ws: sa.Table = sys_db.tables.workflow_status
        types = {key: ws.c[column].type for key, column, _ in _STATUS}
        stmt = sa.text(template.format(schema=schema)).columns(**types)
        _statements[(template, schema)] = stmt
    return stmt


def claim_parked(claims: list[tuple[str, str | None, str]]) -> dict[str, Claimed]:
    """Take parked workflows' ownership over, in one statement: each (workflow id, the
    parked execution's token, new token) gets the new token only if its row is still
    PENDING on this executor with the parked token (or already the new one: a retry after a
    claim whose commit was not acknowledged). Returns each workflow claimed with DBOS's
    status of it, its recorded operations and its topics with a message, read by the same
    statement (for ``execute_claimed``); a workflow that ended, was cancelled or adopted,
    or was resumed already is left alone.

    Plain SQL over three arrays, compiled once: built with SQLAlchemy's ``VALUES``
    construct, the statement was compiled anew for every batch (1.3 ms of CPU each, five
    times the round trip), and DBOS's status read after it was a transaction of its own
    (2.9 of a resume's 31 ms in a wall-clock trace)."""
    from dbos._utils import GlobalParams

    if not claims:
        return {}
    sys_db = _system_database()
    params = {
        "wfs": [c[0] for c in claims],
        "olds": [c[1] for c in claims],
        "tokens": [c[2] for c in claims],
        "pending": WorkflowStatusString.PENDING.value,
        "executor": GlobalParams.executor_id,
    }
    with sys_db.engine.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT")  # one statement: one round trip
        rows = conn.execute(status_stmt(sys_db, _CLAIM), params).all()
    if sharded(sys_db):
        # A sharded database: its status carries a shard key, which DBOS's read fills in.
        ids = [str(r.workflow_uuid) for r in rows]
        statuses = sys_db.get_workflow_statuses(ids)
        return {s["workflow_uuid"]: Claimed(s, None, set()) for s in statuses}
    out: dict[str, Claimed] = {}
    for row in rows:
        status = status_of(row)
        recorded = {int(r[0]): tuple(r[1:]) for r in status.pop("recorded") or []}
        unread = set(status.pop("unread") or [])
        out[status["workflow_uuid"]] = Claimed(status, recorded, unread)
    return out


def status_of(row: Any) -> dict[str, Any]:
    """DBOS's ``WorkflowStatusInternal`` from a row of ``status_stmt`` (with any other
    columns the claim returned), as DBOS's read gives it on an unsharded database."""
    status = dict(row._mapping)
    status["is_debounced"] = bool(status["is_debounced"])
    status["shard_key"] = None
    return status


def execute_claimed(claimed: Claimed, token: str) -> None:
    """Execute a workflow this worker claimed with ``token`` again: it replays from its
    checkpoints (``execute_dequeued_workflow``, as a queue claim does), starting from the
    snapshot its claim read."""
    from dbos._core import execute_dequeued_workflow

    workflow_id = claimed.status["workflow_uuid"]
    if claimed.recorded is not None:
        replay.seed(workflow_id, claimed.recorded, claimed.unread)
    try:
        execute_dequeued_workflow(_instance(), claimed.status, token)
    except BaseException:
        replay.unseed(workflow_id)
        raise
