"""A run's outcome event written with the run's end (``session.v4``), beside ``_dbos_compat``
and checked by the same test (``tests/unit/test_dbos_compat.py``).

``DBOS.set_event`` inside a workflow is an operation of its own: a transaction that checks
the operation's checkpoint and the workflow's owner, upserts the event and its history row
and records the operation, about seven round trips and the largest single share of a
resumed session's worker CPU (a fifth, by py-spy on a burst). A run's outcome is written
once, at the run's end, which is already one fenced, idempotent script of ours
(``run_bounds.end``). So ``session.v4`` puts the event row in that script: one statement
more in a round trip it already makes, committed with the outcome it announces. It is
inserted once (``ON CONFLICT DO NOTHING``): a re-executed end changes nothing, as DBOS's
replayed operation did. The waiters DBOS's listener serves are woken after the commit
through DBOS's own notifier, as ``set_event`` does. No history row is written: DBOS reads
event history only to fork a workflow from a step, which sessions never are.

Private names used: ``SystemDatabase.schema``, ``serializer`` with ``dbos._serialization.
serialize_value``, ``_signal_notification`` and ``dbos._sys_db._dbos_workflow_events_channel``,
and the columns of ``workflow_events`` (``workflow_uuid``, ``key``, ``value``,
``serialization``).
"""

from __future__ import annotations

from typing import Any

from ..store.pg import Stmt
from ._dbos_compat import _system_database, quoted_system_schema


def outcome_event_stmt(workflow_id: str, key: str, value: Any) -> Stmt:
    """The event row, inserted once, in DBOS's encoding (what ``get_event`` decodes)."""
    from dbos._serialization import serialize_value

    sys_db = _system_database()
    encoded, serialization = serialize_value(value, None, sys_db.serializer)
    return (
        f"INSERT INTO {quoted_system_schema()}.workflow_events"
        " (workflow_uuid, key, value, serialization)"
        " VALUES (:wf, :key, :value, :ser) ON CONFLICT (workflow_uuid, key) DO NOTHING",
        {"wf": workflow_id, "key": key, "value": encoded, "ser": serialization},
    )


def signal_event(workflow_id: str, key: str) -> None:
    """Wake ``get_event`` waiters of other processes, once the event is committed (DBOS's
    coalesced NOTIFY; without LISTEN/NOTIFY its waiters poll, as for ``set_event``)."""
    from dbos._sys_db import _dbos_workflow_events_channel

    _system_database()._signal_notification(_dbos_workflow_events_channel, f"{workflow_id}::{key}")
