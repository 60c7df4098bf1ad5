"""A replaying execution reads its recorded DBOS operations in one query.

DBOS checks each operation of a workflow against its checkpoint before running it
(``SystemDatabase.check_operation_execution``): a transaction with two reads, on a thread
hop, per operation. A re-executed workflow (a parked wait resumed, a recovery) replays
every operation its run recorded so far, about four per earlier wait, each paying that
transaction. Here the first check of a session workflow's execution reads the workflow's
status and *all* its recorded operations at once; later checks below the highest recorded
id are answered from that snapshot, and once the execution passes it (every fresh
execution at once) DBOS's own check runs again.

Why a snapshot answers correctly: operation outputs are written once, by the execution
that owns the workflow, in increasing id order, and this execution owns it now. So below
the highest recorded id the snapshot is complete: a missing id is an operation an earlier
execution began and never recorded (a ``recv`` whose wait it left, a step it crashed in),
which DBOS would also find missing. What a snapshot skips is the per-operation status
read: a cancellation during the replay is seen at the first operation past the snapshot
instead of at the next replayed one. A recorded name other than the expected one goes to
DBOS's check, which raises its ``DBOSUnexpectedStepError``.

A parked wait's resume reads the snapshot with its claim (``seed``; the claim is the moment
this worker becomes the owner), and with it the topics that have a message waiting, so the
resumed ``recv`` neither reads its records nor asks whether its message is there.

Private names used (behaviour: ``tests/integration/test_parking.py``): ``SystemDatabase.
check_operation_execution`` (replaced on the instance), ``tables.workflow_status`` and
``tables.operation_outputs``, ``_key_column`` (a sharded database is left alone) and
``dbos._sys_db.db_retry``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from .internals import replace_on_system_database

Recorded = dict[int, tuple[Any, ...]]
"""function id -> (output, error, function_name, child_workflow_id, serialization)."""


@dataclass(slots=True)
class _Snapshot:
    workflow_id: str
    rows: Recorded | None = None
    """None until the execution's first check read it (or its claim did: ``seed``)."""
    last: int = -1
    """The highest recorded id: past it, DBOS's own check."""
    unread: set[str] = field(default_factory=set)
    """Topics with a message the claim saw, for the ``recv`` that resumes."""


_current: ContextVar[_Snapshot | None] = ContextVar("dbos_agents_replay", default=None)
_seeds: dict[str, tuple[Recorded, set[str]]] = {}
_seeds_lock = threading.Lock()


def seed(workflow_id: str, rows: Recorded, unread: set[str]) -> None:
    """What the claim of a parked workflow read with it (``parking.claim_parked``):
    its recorded operations and the topics with a message for it. The execution about to
    start takes them as its snapshot instead of reading. The claim made this worker the
    owner, so nothing records an operation of the workflow after it but that execution."""
    with _seeds_lock:
        _seeds[workflow_id] = (rows, unread)


def unseed(workflow_id: str) -> None:
    """The execution of a seeded workflow did not start."""
    with _seeds_lock:
        _seeds.pop(workflow_id, None)


def enter_workflow(workflow_id: str) -> bool:
    """Called as a session workflow's execution begins (its checks may use a snapshot).
    Returns whether a claim seeded it: the execution resumes a parked wait."""
    with _seeds_lock:
        seeded = _seeds.pop(workflow_id, None)
    snap = _Snapshot(workflow_id)
    if seeded is not None:
        snap.rows, snap.unread = seeded
        snap.last = max(snap.rows, default=-1)
    _current.set(snap)
    return seeded is not None


def message_waiting(workflow_id: str, topic: str) -> bool:
    """Whether this execution's claim saw a message on ``topic`` (asked once, by the
    ``recv``'s check: a message is only consumed by the ``recv`` that checks for it)."""
    snap = _current.get()
    if snap is None or snap.workflow_id != workflow_id or topic not in snap.unread:
        return False
    snap.unread.discard(topic)
    return True


def install() -> None:
    """Replace DBOS's operation check on the launched system database (idempotent)."""
    replace_on_system_database("check_operation_execution", _check)


def _check(sys_db: Any, original: Any) -> Any:
    from dbos._sys_db import db_retry

    read = db_retry(sys_db=sys_db)(_reader(sys_db))

    def check(
        workflow_id: str, function_id: int, function_name: str, *, owner_key: str | None = None
    ) -> Any:
        snap = _current.get()
        if snap is None or snap.workflow_id != workflow_id or owner_key is not None:
            return original(workflow_id, function_id, function_name, owner_key=owner_key)
        if snap.rows is None:  # this execution's first check: status and every record
            snap.rows = read(workflow_id)
            snap.last = max(snap.rows, default=-1)
        elif function_id > snap.last:
            return original(workflow_id, function_id, function_name)
        row = snap.rows.get(function_id)
        if function_id >= snap.last:
            snap.rows, snap.last = {}, -1  # past the replay: free it
        if row is None:
            return None
        output, error, name, child, serialization = row
        if name != function_name:  # DBOS's check raises its DBOSUnexpectedStepError
            return original(workflow_id, function_id, function_name)
        return {
            "output": output,
            "error": error,
            "serialization": serialization,
            "child_workflow_id": child,
            "child_shard_key": None,
        }

    return check


def _reader(sys_db: Any) -> Callable[[str], Recorded]:
    """The workflow's status and recorded operations, in one statement (DBOS's check
    reads the same two tables for one operation)."""
    from dbos._error import DBOSWorkflowCancelledError
    from dbos._sys_db import WorkflowStatusString

    ws: sa.Table = sys_db.tables.workflow_status
    oo: sa.Table = sys_db.tables.operation_outputs
    stmt = (
        sa.select(
            ws.c.status,
            oo.c.function_id,
            oo.c.output,
            oo.c.error,
            oo.c.function_name,
            oo.c.child_workflow_id,
            oo.c.serialization,
        )
        .select_from(ws.outerjoin(oo, oo.c.workflow_uuid == ws.c.workflow_uuid))
        .where(ws.c.workflow_uuid == sa.bindparam("wf", type_=sa.Text))
    )

    def read(workflow_id: str) -> Recorded:
        # One statement, so no transaction: one round trip instead of four.
        with sys_db.engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT")
            rows = conn.execute(stmt, {"wf": workflow_id}).all()
        assert rows, f"Error: Workflow {workflow_id} does not exist"
        if rows[0][0] == WorkflowStatusString.CANCELLED.value:
            raise DBOSWorkflowCancelledError(
                f"Workflow {workflow_id} is cancelled. Aborting function."
            )
        return {int(r[1]): tuple(r[2:]) for r in rows if r[1] is not None}

    return read
