"""Fails loudly when a DBOS upgrade moves a private name ``runtime/_dbos_compat.py`` uses.

``_dbos_compat`` is the only module touching DBOS internals. Each assertion names what it
protects, so a failure after an upgrade says which compat function to revisit.
"""

from __future__ import annotations

import inspect
import re
from importlib.metadata import version

import pytest
from dbos import DBOS, DBOSClient
from dbos._dbos import _get_dbos_instance
from dbos._queue import queue_thread
from dbos._schemas.system_database import SystemSchema
from dbos._sys_db import (
    KeySignal,
    LoopAwareEvent,
    SystemDatabase,
    ThreadSafeEventDict,
    WorkflowStatusString,
)
from dbos._sys_db_postgres import PostgresSystemDatabase

from dbos_agents.runtime import _dbos_compat as compat


def _columns(table: str) -> set[str]:
    return {c.name for c in getattr(SystemSchema, table).columns}


def test_dbos_version_reviewed() -> None:
    # After an upgrade: review _dbos_compat against the new DBOS source, then bump this.
    assert version("dbos").startswith("3.4."), version("dbos")


def test_workflow_status_table_and_columns_for_cancel_in_transaction() -> None:
    assert SystemDatabase.tables is SystemSchema
    assert {
        "workflow_uuid",
        "status",
        "owner_xid",
        "queue_name",
        "deduplication_id",
        "started_at_epoch_ms",
        "updated_at",
        "completed_at",
    } <= _columns("workflow_status")
    # DBOSClient keeps its SystemDatabase as ``_sys_db``; it knows its schema (system_schema).
    assert "self._sys_db = " in inspect.getsource(DBOSClient.__init__)
    assert "self.schema = " in inspect.getsource(SystemDatabase.__init__)
    for name in ("SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"):
        assert hasattr(WorkflowStatusString, name), name
    assert set(compat.ENDED) >= set(compat.FINISHED)


def test_tables_for_checkpoints_and_wake_ups() -> None:
    assert {"workflow_uuid", "function_id", "completed_at_epoch_ms"} <= _columns(
        "operation_outputs"
    )
    assert {"destination_uuid", "topic", "consumed"} <= _columns("notifications")
    assert {"workflow_uuid", "key"} <= _columns("workflow_events")
    # Step outputs are recorded only on completion: a row means "checkpoint written".
    record = inspect.getsource(SystemDatabase.record_operation_result)
    assert "completed_at_epoch_ms" in record


def test_dbos_instance_internals_for_drain_and_adoption() -> None:
    assert callable(_get_dbos_instance)
    init = inspect.getsource(DBOS.__init__)
    assert "self.background_thread_stop_events" in init
    launch = inspect.getsource(DBOS._launch)
    # The queue thread (every queue, the internal recovery queue too) stops on an event
    # registered in background_thread_stop_events; the notification listener does not.
    assert "background_thread_stop_events.append(evt)" in launch
    assert "target=queue_thread, args=(evt, self)" in launch
    assert list(inspect.signature(queue_thread).parameters) == ["stop_event", "dbos"]
    assert "run_notification_listener" in launch
    assert isinstance(inspect.getattr_static(DBOS, "_sys_db"), property)
    assert callable(DBOS._recover_pending_workflows)
    assert list(inspect.signature(DBOS._recover_pending_workflows).parameters) == ["executor_ids"]


def test_what_the_chunked_recovery_relies_on() -> None:
    """``_dbos_recovery``: launch hands the pending list to the module-level
    ``startup_recovery_thread`` (looked up at call time, so ours replaces it), and DBOS's
    per-workflow re-enqueue resets exactly the columns ours resets."""
    from dbos import _dbos, _recovery
    from dbos._sys_db import GetPendingWorkflowsOutput
    from dbos._utils import INTERNAL_QUEUE_NAME, GlobalParams

    launch = inspect.getsource(DBOS._launch)
    assert "self._executor.submit(startup_recovery_thread, self, workflow_ids)" in launch
    assert "get_pending_workflows(" in launch
    assert hasattr(_dbos, "startup_recovery_thread")
    assert list(inspect.signature(_recovery.startup_recovery_thread).parameters) == [
        "dbos",
        "pending_workflows",
    ]
    assert "reenqueue_for_recovery(" in inspect.getsource(_recovery._recover_workflow)
    assert "INTERNAL_QUEUE_NAME" in inspect.getsource(_recovery._recover_workflow)
    reenqueue = inspect.getsource(SystemDatabase.reenqueue_for_recovery)
    values = reenqueue[reenqueue.index(".values(") :]
    reset = set(re.findall(r"^\s+(\w+)=", values, re.M))
    assert reset == {"status", "owner_xid", "started_at_epoch_ms", "updated_at", "queue_name"}
    assert "owner_xid=None" in values and "started_at_epoch_ms=None" in values
    assert "queue_name=sa.func.coalesce(" in values
    assert {"workflow_id", "shard_key"} <= set(
        inspect.signature(GetPendingWorkflowsOutput).parameters
    )
    assert INTERNAL_QUEUE_NAME and hasattr(GlobalParams, "app_version")
    assert callable(DBOS._recover_pending_workflows)  # the sharded path keeps DBOS's


def test_listener_internals_for_lost_wake_ups() -> None:
    listener = inspect.getsource(PostgresSystemDatabase._notification_listener)
    # A new connection object per (re)connect, assigned and LISTENed under the lock.
    assert "with self._listener_thread_lock:" in listener
    assert "self.notification_conn = self.engine.raw_connection()" in listener
    assert "LISTEN" in listener
    assert "notification_conn" in PostgresSystemDatabase.__annotations__
    assert "self._listener_thread_lock = threading.Lock()" in inspect.getsource(
        SystemDatabase.__init__
    )
    init = inspect.getsource(SystemDatabase.__init__)
    assert "self.notifications_map = ThreadSafeEventDict()" in init
    assert "self.workflow_events_map = ThreadSafeEventDict()" in init
    # snapshot() -> (key, (workflow id, topic or key, shard key), KeySignal with set()).
    waiters = ThreadSafeEventDict()
    ev = LoopAwareEvent()
    waiters.add("wf::topic", ev, ("wf", "topic", None))
    ((key, (wf, topic, shard), signal),) = waiters.snapshot()
    assert (key, wf, topic, shard) == ("wf::topic", "wf", "topic", None)
    assert isinstance(signal, KeySignal)
    signal.set()
    assert ev.is_set()
    # recv wakes on its event, then consumes: a wake with nothing to read is a false
    # timeout, which is why catch_up_waiters wakes only waiters with a row to read.
    recv = inspect.getsource(SystemDatabase.recv_async)
    assert "recv_consume" in recv and "_event_recheck_interval" in recv


def test_compat_functions_exist() -> None:
    for name in (
        "cancel_workflows_in_transaction",
        "workflow_status_table",
        "stop_dequeuing",
        "checkpointed_steps",
        "ended_workflows",
        "catch_up_waiters",
        "listener_connection",
    ):
        assert callable(getattr(compat, name)), name


@pytest.mark.parametrize("name", ["workflow_id", "step_id"])
def test_public_context_names_drain_relies_on(name: str) -> None:
    assert hasattr(DBOS, name)


def test_the_queue_claim_that_dequeue_now_repeats() -> None:
    from dbos._core import execute_dequeued_workflow
    from dbos._queue import Queue, queue_worker_thread
    from dbos._utils import GlobalParams, generate_uuid

    # dequeue_now mirrors one poll of the queue thread for a queue without limits.
    source = inspect.getsource(queue_worker_thread)
    for name in ("start_queued_workflows", "count_for_queue", "execute_dequeued_workflow"):
        assert name in source, name
    params = inspect.signature(SystemDatabase.start_queued_workflows).parameters
    assert list(params)[:6] == [
        "self",
        "queue",
        "executor_id",
        "app_version",
        "queue_partition_key",
        "local_running_count",
    ]
    assert "owner_xid" in params
    # dequeue_now passes 0 as the local count: it is read only under a worker limit.
    claim = inspect.getsource(SystemDatabase.start_queued_workflows)
    assert claim.count(" local_running_count") == 2, "the local count has a new use"
    assert "queue._worker_concurrency - local_running_count" in claim
    assert list(inspect.signature(execute_dequeued_workflow).parameters) == [
        "dbos",
        "status",
        "owner_xid",
    ]
    for attr in ("_has_partition_limits", "_limiter", "_concurrency", "_worker_concurrency"):
        assert attr in inspect.getsource(Queue), attr
    assert hasattr(SystemDatabase, "get_queue") and hasattr(SystemDatabase, "get_workflow_statuses")
    assert callable(generate_uuid) and hasattr(GlobalParams, "executor_id")
    assert "_active_workflows_set" in inspect.getsource(DBOS.__init__)


@pytest.mark.asyncio
async def test_outside_workflow_runs_with_no_dbos_context() -> None:
    import asyncio

    from dbos._context import DBOSContext, _dbos_context_var, get_local_dbos_context

    from dbos_agents.runtime._dbos_compat import outside_workflow

    async def inside() -> object:
        await asyncio.sleep(0)
        return get_local_dbos_context()

    token = _dbos_context_var.set(DBOSContext())
    try:
        assert get_local_dbos_context() is not None
        assert await outside_workflow(inside()) is None
        assert get_local_dbos_context() is not None  # the caller's context is untouched
    finally:
        _dbos_context_var.reset(token)


def test_what_parking_a_wait_relies_on() -> None:
    """``_dbos_parking``: the waiter map's entries, an execution's ownership token, DBOS
    records no outcome for a cancelled workflow task, and a claimed row re-executes."""
    from dbos._context import DBOSContext, current_owner_xid
    from dbos._core import _execute_workflow_async, execute_dequeued_workflow
    from dbos._outcome import Pending

    assert "_waiter" in dir(SystemDatabase)
    waiters = ThreadSafeEventDict()
    ev = LoopAwareEvent()
    waiters.add("wf::t", ev, ("wf", "t", None))
    signal = waiters.get("wf::t")
    assert isinstance(signal, KeySignal) and signal._waiters == {ev}
    with signal._lock:
        pass
    waiters.pop("wf::t", ev)
    assert waiters.get("wf::t") is None
    assert "owner_xid" in inspect.getsource(DBOSContext.__init__)
    assert callable(current_owner_xid)
    # A cancelled task propagates CancelledError past the outcome's recording (which
    # catches Exception only), so the workflow stays PENDING.
    wrap = inspect.getsource(Pending._wrap)
    assert "except asyncio.CancelledError" in wrap and "raise" in wrap
    assert "except Exception" in inspect.getsource(_execute_workflow_async)
    params = inspect.signature(execute_dequeued_workflow).parameters
    assert list(params) == ["dbos", "status", "owner_xid"]
    assert {"workflow_uuid", "status", "executor_id", "owner_xid"} <= _columns("workflow_status")
    assert {"destination_uuid", "topic", "consumed"} <= _columns("notifications")


def test_the_resume_claim_reads_the_status_dbos_reads() -> None:
    """``claim_parked`` returns DBOS's ``WorkflowStatusInternal`` for ``execute_dequeued_
    workflow``: the keys DBOS's own status read builds are the claim's (the values are
    compared against a real read in test_parking)."""
    import re

    from dbos._sys_db import WorkflowStatusInternal

    from dbos_agents.runtime import _dbos_parking

    read = inspect.getsource(SystemDatabase.get_workflow_statuses)
    keys = set(re.findall(r'^\s+"(\w+)": ', read, re.M))
    claimed = {key for key, _, _ in _dbos_parking._STATUS} | {"shard_key"}
    assert keys == claimed == set(WorkflowStatusInternal.__annotations__)
    for _, column, _ in _dbos_parking._STATUS:
        assert column in _columns("workflow_status")
    assert {"workflow_uuid", "inputs"} <= _columns("workflow_input")


def test_what_the_replay_snapshot_relies_on() -> None:
    """``_dbos_replay``: the operation check it stands in for (called on the instance, its
    result's keys, the two tables it reads), the shard-key switch and ``db_retry``."""
    from dbos._sys_db import db_retry

    params = inspect.signature(SystemDatabase.check_operation_execution).parameters
    assert list(params) == ["self", "workflow_id", "function_id", "function_name", "owner_key"]
    txn = inspect.getsource(SystemDatabase._check_operation_execution_txn)
    for key in ("output", "error", "serialization", "child_workflow_id", "child_shard_key"):
        assert f'"{key}"' in txn
    assert "WorkflowStatusString.CANCELLED" in txn and "DBOSUnexpectedStepError" in txn
    # Its callers go through the instance attribute, which install() replaces.
    assert "self.check_operation_execution(" in inspect.getsource(SystemDatabase.recv_setup)
    assert "_key_column" in dir(SystemDatabase)
    assert "sys_db" in inspect.signature(db_retry).parameters
    assert {"workflow_uuid", "function_id", "function_name", "output", "error"} <= _columns(
        "operation_outputs"
    )
    assert {"child_workflow_id", "serialization"} <= _columns("operation_outputs")


def test_what_the_outcome_event_in_the_run_end_relies_on() -> None:
    """``_dbos_events``: the event table's columns and key, the value encoding get_event
    decodes, the schema name, and the notifier set_event wakes its waiters through."""
    from dbos._serialization import DefaultSerializer, deserialize_value, serialize_value
    from dbos._sys_db import _dbos_workflow_events_channel

    assert {"workflow_uuid", "key", "value", "serialization"} <= _columns("workflow_events")
    assert [c.name for c in SystemSchema.workflow_events.primary_key] == ["workflow_uuid", "key"]
    assert "self.schema" in inspect.getsource(SystemDatabase.__init__)
    value, ser = serialize_value({"a": [1]}, None, DefaultSerializer())
    assert deserialize_value(value, ser, DefaultSerializer()) == {"a": [1]}
    assert _dbos_workflow_events_channel == "dbos_workflow_events_channel"
    set_event = inspect.getsource(SystemDatabase.set_event_from_workflow)
    assert "self._signal_notification(" in set_event and "_dbos_workflow_events_channel" in (
        set_event
    )
    assert "pg_notify(:channel" in inspect.getsource(PostgresSystemDatabase._flush_notifications)
    # get_event reads the row and waits on the key the notifier's payload names.
    get_event = inspect.getsource(SystemDatabase.get_event)
    assert "workflow_events" in get_event


def test_what_the_one_statement_check_relies_on() -> None:
    """``_dbos_recv._checker``: DBOS's check for a message already there (called through
    the instance, its signature, the rows it looks for, its limiter and its event)."""
    params = inspect.signature(SystemDatabase.recv_check).parameters
    assert list(params) == ["self", "workflow_uuid", "topic", "event"]
    assert "self.recv_check(" in inspect.getsource(SystemDatabase.recv_setup)
    assert "self.recv_check," in inspect.getsource(SystemDatabase.recv_async)
    check = inspect.getsource(SystemDatabase.recv_check)
    for part in ('"destination_uuid"', "c.topic == normalized_topic", "consumed == False"):
        assert part in check, part
    assert "self.poll_limiter" in check and "event.set()" in check
    assert "Fallback notification poll failed" in check


def test_what_the_one_statement_consume_relies_on() -> None:
    """``_dbos_recv``: the consume it replaces (called through the instance, its signature
    and steps), the owner check it mirrors, the errors it raises and the columns it writes."""
    from dbos._context import current_owner_xid
    from dbos._error import DBOSStepNondeterminismError, DBOSWorkflowConflictIDError
    from dbos._serialization import serialize_value_as
    from dbos._sys_db import _dbos_null_topic, db_retry

    params = inspect.signature(SystemDatabase.recv_consume).parameters
    assert list(params) == ["self", "workflow_uuid", "function_id", "topic", "start_time"]
    assert "self.recv_consume," in inspect.getsource(SystemDatabase.recv_async)
    assert "self.recv_consume(" in inspect.getsource(SystemDatabase.recv)
    consume = inspect.getsource(SystemDatabase.recv_consume)
    for step in (
        "operation_outputs.c.function_id == function_id",  # a retry returns the recorded
        "created_at_epoch_ms.asc()",  # the oldest message
        "consumed_by_function_id=function_id",
        "serialize_value_as(",
        '"DBOS.recv"',
        "_record_operation_result_txn(",
    ):
        assert step in consume, step
    record = inspect.getsource(SystemDatabase._record_operation_result_txn)
    assert "current_owner_xid(" in record and "_check_owner_txn(" in record
    assert "DBOSStepNondeterminismError" in record and "retention_timestamp" in record
    assert "application_name=self.app_name" in record
    assert "with_for_update(key_share=True)" in inspect.getsource(SystemDatabase._check_owner_txn)
    assert "DBOSWorkflowConflictIDError" in inspect.getsource(SystemDatabase._check_owner_txn)
    assert _dbos_null_topic == "__null__topic__"
    assert callable(current_owner_xid) and callable(serialize_value_as) and callable(db_retry)
    # Raised as DBOS raises them (the conflict is a BaseException: the execution stops).
    assert list(inspect.signature(DBOSWorkflowConflictIDError).parameters) == ["workflow_id"]
    assert list(inspect.signature(DBOSStepNondeterminismError).parameters) == [
        "workflow_id",
        "step_id",
    ]
    assert {
        "workflow_uuid",
        "function_id",
        "function_name",
        "started_at_epoch_ms",
        "completed_at_epoch_ms",
        "output",
        "error",
        "child_workflow_id",
        "serialization",
        "application_name",
        "retention_timestamp",
    } == _columns("operation_outputs")
    assert {
        "destination_uuid",
        "topic",
        "message",
        "created_at_epoch_ms",
        "message_uuid",
        "serialization",
        "consumed",
        "consumed_by_function_id",
    } == _columns("notifications")


def test_what_the_one_statement_send_relies_on() -> None:
    """``_dbos_send``: the row DBOS's ``send_in_transaction`` writes (its message id from
    the idempotency key, the insert that keeps the first, the serializer call) and the
    shard-key switch (the row itself is compared with DBOS's in test_client_tools)."""
    from dbos._client import DBOSClient as Client
    from dbos._serialization import serialize_value

    sends = inspect.getsource(Client.send_in_transaction)
    assert "send_bulk_with_connection(" in sends
    txn = inspect.getsource(SystemDatabase._send_bulk_txn)
    for part in (
        'f"{m.idempotency_key}::{dest}"',
        "on_conflict_do_nothing(",
        "serialize_value(m.message, serialization_type, self.serializer)",
        '"destination_uuid": dest',
        "self._wf_values(dest, shard_key=m.shard_key)",
    ):
        assert part in txn, part
    assert {"destination_uuid", "topic", "message", "message_uuid", "serialization"} <= _columns(
        "notifications"
    )
    assert list(inspect.signature(serialize_value).parameters) == [
        "value",
        "serialization_type",
        "serializer",
    ]
    assert "_key_column" in dir(SystemDatabase)
