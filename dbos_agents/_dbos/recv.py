"""A ``recv``'s consume phase in one statement (a fast path; behaviour:
``tests/integration/test_dbos_recv.py``).

Every woken wait (a client tool's result, an approval, a persistent session's next message)
ends in DBOS's ``SystemDatabase.recv_consume``: a transaction that reads whether an earlier
attempt recorded the ``recv``, takes the oldest unconsumed message on the topic, checks the
execution still owns the workflow (locking its status row) and records the operation:
five round trips, each statement built anew with SQLAlchemy. py-spy on a burst of resumed
sessions put a fifth of the worker's Python time in it, and a resume waits for it.

Here the same steps are one statement, compiled once and run in autocommit (one implicit
transaction, so all or nothing, as before):

- the status row is locked (``FOR NO KEY UPDATE``) and its owner compared with this
  execution's token; a mismatch writes nothing and raises DBOS's
  ``DBOSWorkflowConflictIDError``, as its owner check does;
- a ``recv`` already recorded (a retry after a commit that was not acknowledged) returns
  the recorded message and consumes nothing;
- otherwise the oldest unconsumed message is marked consumed by this operation and the
  operation row is inserted with the message as its output (DBOS decodes and re-encodes it
  in the same encoding first: the stored value decodes to the same message); no message
  (the timeout) records DBOS's encoding of ``None``. A row that appeared meanwhile makes
  the insert fail, which rolls the consume back too, and raises DBOS's
  ``DBOSStepNondeterminismError``, as its insert does.

It replaces the method on the launched system database (DBOS calls it through the
instance), wrapped in DBOS's ``db_retry`` like the original. A sharded system database is
left alone.

Its check for a message already there (``recv_check``, run as every wait starts or resumes
and at each fallback re-check) is one statement too, in autocommit, instead of a query
built anew in a BEGIN/COMMIT transaction; a resumed parked wait whose claim saw its
message skips it (``replay.message_waiting``).

Private names used: ``SystemDatabase.recv_consume`` and ``recv_check`` (replaced),
``poll_limiter``, ``dbos._logger.dbos_logger``, ``schema``, ``app_name``,
``serializer``, ``_key_column``, ``engine``, ``dbos._sys_db.db_retry`` and
``_dbos_null_topic``, ``dbos._context.current_owner_xid``, ``dbos._serialization.
deserialize_value``/``serialize_value_as``, the errors ``DBOSWorkflowConflictIDError`` and
``DBOSStepNondeterminismError``, and the columns of ``workflow_status``,
``notifications`` and ``operation_outputs``.
"""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa

from . import replay
from .internals import quoted_system_schema, replace_on_system_database

FUNCTION_NAME = "DBOS.recv"

_CONSUME = """
WITH own AS (
    SELECT owner_xid FROM {s}.workflow_status WHERE workflow_uuid = :wf FOR NO KEY UPDATE
), allowed AS (
    SELECT 1 WHERE CAST(:owner AS text) IS NULL
        OR EXISTS (SELECT 1 FROM own WHERE owner_xid = CAST(:owner AS text))
), prior AS (
    SELECT output, serialization FROM {s}.operation_outputs
    WHERE workflow_uuid = :wf AND function_id = :fid
), msg AS (
    UPDATE {s}.notifications SET consumed = true, consumed_by_function_id = :fid
    WHERE destination_uuid = :wf AND topic = :topic AND consumed = false
      AND message_uuid = (
        SELECT message_uuid FROM {s}.notifications
        WHERE destination_uuid = :wf AND topic = :topic AND consumed = false
        ORDER BY created_at_epoch_ms ASC LIMIT 1)
      AND NOT EXISTS (SELECT 1 FROM prior) AND EXISTS (SELECT 1 FROM allowed)
    RETURNING message, serialization
), recorded AS (  -- a data-modifying WITH runs to completion, read or not
    INSERT INTO {s}.operation_outputs (workflow_uuid, function_id, function_name,
        started_at_epoch_ms, completed_at_epoch_ms, output, error, child_workflow_id,
        serialization, application_name, retention_timestamp)
    SELECT :wf, :fid, :name, :started, :completed,
        CASE WHEN EXISTS (SELECT 1 FROM msg) THEN (SELECT message FROM msg) ELSE :none END,
        NULL, NULL,
        CASE WHEN EXISTS (SELECT 1 FROM msg) THEN (SELECT serialization FROM msg)
            ELSE :none_ser END,
        :app, CAST(extract(epoch FROM now()) * 1000 AS bigint)
    WHERE NOT EXISTS (SELECT 1 FROM prior) AND EXISTS (SELECT 1 FROM allowed)
)
SELECT EXISTS (SELECT 1 FROM allowed) AS allowed,
    EXISTS (SELECT 1 FROM prior) AS replayed,
    (SELECT output FROM prior) AS prior_output,
    (SELECT serialization FROM prior) AS prior_serialization,
    EXISTS (SELECT 1 FROM msg) AS received,
    (SELECT message FROM msg) AS message,
    (SELECT serialization FROM msg) AS serialization
"""


_CHECK = (
    "SELECT 1 FROM {s}.notifications WHERE destination_uuid = :wf AND topic = :topic"
    " AND consumed = false LIMIT 1"
)


def install() -> None:
    """Replace DBOS's ``recv_consume`` and ``recv_check`` on the launched system database
    (idempotent)."""
    from dbos._sys_db import db_retry

    replace_on_system_database(
        "recv_consume", lambda sys_db, _: db_retry(sys_db=sys_db)(_consumer(sys_db))
    )
    replace_on_system_database("recv_check", lambda sys_db, _: _checker(sys_db))


def _checker(sys_db: Any) -> Any:
    """DBOS's ``recv_check`` (is a message for the wait already there? then set its
    event), as one statement compiled once in autocommit: DBOS's builds the query anew
    and runs it in a BEGIN/COMMIT transaction, three round trips, on every wait that
    starts or resumes and at every fallback re-check."""
    from dbos._logger import dbos_logger
    from dbos._sys_db import _dbos_null_topic

    stmt = sa.text(_CHECK.format(s=quoted_system_schema()))

    def recv_check(workflow_uuid: str, topic: str | None, event: Any) -> None:
        params = {"wf": workflow_uuid, "topic": topic if topic is not None else _dbos_null_topic}
        if replay.message_waiting(workflow_uuid, params["topic"]):
            event.set()  # a resumed wait: its claim saw the message (nothing else takes it)
            return
        try:
            with sys_db.poll_limiter, sys_db.engine.connect() as conn:  # a polling read
                conn.execution_options(isolation_level="AUTOCOMMIT")
                found = conn.execute(stmt, params).first() is not None
        except Exception:  # as DBOS's: the listener or the next re-check delivers it
            dbos_logger.warning("Fallback notification poll failed", exc_info=True)
            return
        if found:
            event.set()

    return recv_check


def _consumer(sys_db: Any) -> Any:
    from dbos._context import current_owner_xid
    from dbos._error import DBOSStepNondeterminismError, DBOSWorkflowConflictIDError
    from dbos._serialization import deserialize_value, serialize_value_as
    from dbos._sys_db import _dbos_null_topic

    stmt = sa.text(_CONSUME.format(s=quoted_system_schema()))
    none, none_ser = serialize_value_as(None, None, sys_db.serializer)

    def recv_consume(
        workflow_uuid: str, function_id: int, topic: str | None, start_time: int
    ) -> Any:
        params = {
            "wf": workflow_uuid,
            "fid": function_id,
            "topic": topic if topic is not None else _dbos_null_topic,
            "owner": current_owner_xid(workflow_uuid),
            "name": FUNCTION_NAME,
            "started": start_time,
            "completed": int(time.time() * 1000),
            "none": none,
            "none_ser": none_ser,
            "app": sys_db.app_name,
        }
        try:
            with sys_db.engine.connect() as conn:
                conn.execution_options(isolation_level="AUTOCOMMIT")  # one statement
                row = conn.execute(stmt, params).one()
        except sa.exc.IntegrityError as exc:  # recorded meanwhile: DBOS's insert error
            raise DBOSStepNondeterminismError(workflow_uuid, function_id) from exc
        if row.replayed:  # an earlier attempt committed: its message, nothing consumed
            return deserialize_value(row.prior_output, row.prior_serialization, sys_db.serializer)
        if not row.allowed:
            raise DBOSWorkflowConflictIDError(workflow_uuid)
        if not row.received:
            return None
        return deserialize_value(row.message, row.serialization, sys_db.serializer)

    return recv_consume
