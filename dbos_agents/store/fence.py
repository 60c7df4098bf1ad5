"""Live pieces fenced on the execution that writes them (migration 0019).

An execution adopted while alive (a frozen worker that wakes, an asymmetric partition)
still streams. A piece therefore names its ``Writer``: the workflow and the ownership
token DBOS wrote to the workflow's status row when this execution claimed it (a re-enqueue
clears it, the next claim writes another). The insert of the pieces checks it in the same
statement (``Fence``): a stale writer's rows are left out and its sessions named, or, for
a transaction that must write all or nothing (a turn's record, a run's end, a batch with
staged results), the statement fails with ``STALE_SQLSTATE``.

The check share-locks the workflows' status rows, in workflow order, so it serializes with
the re-enqueue and the claim that move the ownership: a piece either commits before the
adopter's claim, and so before the adopter reads the log, or is refused. A cancelled
workflow (an interrupt) passes: no other execution runs it, the interrupted reply's
withdrawal must be shown, and the run's own fence keeps its turn out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .schema import SCHEMA as S

STALE_SQLSTATE = "DA002"
"""A write of live pieces by an execution that no longer owns its run."""


class StaleWriter(Exception):
    """This execution no longer owns its run (adopted while alive): Postgres refused its
    live pieces; it must stop and record nothing."""


def is_stale(exc: BaseException) -> bool:
    return getattr(exc, "sqlstate", None) == STALE_SQLSTATE


@dataclass(frozen=True)
class Writer:
    """The execution writing a session's pieces (see the module doc)."""

    workflow_id: str
    token: str
    system_schema: str
    """DBOS's schema, quoted (``_dbos.quoted``)."""


_OWNERS = "jsonb_array_elements(CAST(:owners AS jsonb)) AS o(v)"
"""The writers, one ``[workflow, session, token]`` each: one JSON parameter (a C
``json.dumps``), not three text arrays, which psycopg would bind element by element."""


@dataclass(frozen=True)
class Fence:
    """The SQL of one insert's check: its ``WITH`` items (``own``: the sessions whose
    writer still owns its workflow), the ``WHERE`` that keeps (or refuses) each row, and
    their parameters."""

    with_items: str
    where: str
    params: dict[str, Any]

    REFUSED = f"ARRAY(SELECT o.v->>1 FROM {_OWNERS} WHERE o.v->>1 NOT IN (SELECT sid FROM own))"
    """The sessions whose rows the insert left out (for its result)."""


def fence(
    writers: Mapping[str, Writer], *, strict: bool, session: str, others: bool
) -> Fence | None:
    """The check of an insert whose rows' session is the SQL expression ``session``, for
    the sessions of ``writers``; ``others``: rows of sessions without a writer pass too.
    None when there is no writer. ``strict``: a refused row fails the statement instead of
    being left out.

    The status rows are read by key alone, then matched to their writers: an insert is
    planned at every batch (a script has no prepared plan), and a join of DBOS's table,
    with its many partial indexes, on the writers would cost more to plan than to run."""
    if not writers:
        return None
    owners = sorted([w.workflow_id, sid, w.token] for sid, w in writers.items())
    system = next(iter(writers.values())).system_schema
    with_items = (
        "status_rows AS MATERIALIZED (SELECT ws.workflow_uuid AS wf, ws.status, ws.owner_xid"
        f" FROM {system}.workflow_status ws WHERE ws.workflow_uuid = ANY(ARRAY("
        f"SELECT o.v->>0 FROM {_OWNERS})) ORDER BY ws.workflow_uuid FOR SHARE),"
        f" own AS (SELECT o.v->>1 AS sid FROM {_OWNERS} JOIN status_rows w ON w.wf = o.v->>0"
        " WHERE w.status = 'CANCELLED' OR (w.status = 'PENDING' AND w.owner_xid = o.v->>2))"
    )
    params: dict[str, Any] = {"owners": json.dumps(owners, separators=(",", ":"))}
    ok = f"{session} IN (SELECT sid FROM own)"
    if others:
        ok = f"({ok} OR NOT ({session} = ANY(CAST(:fenced AS text[]))))"
        params["fenced"] = sorted(writers)
    where = (
        f" WHERE CASE WHEN {ok} THEN true ELSE {S}.refuse_stale_writer({session},"
        f" (SELECT o.v->>0 FROM {_OWNERS} WHERE o.v->>1 = {session})) END"
        if strict
        else f" WHERE {ok}"
    )
    return Fence(with_items, where, params)
