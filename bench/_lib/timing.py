"""When things happened, read from the rows after the fact, and waiting for a session to
be *armed* (its workflow sits in ``recv``).

A resume is timed from ``t0 = time.time()`` taken just before the submit to the
timestamps Postgres wrote: ``dbos.workflow_status.updated_at`` of the run's outcome ("run
finished") and ``dbos_agents.messages.created_at`` of the tool message. The same host clock
serves both, and no poll sits on the critical path. A workflow is armed once its
``DBOS.sleep`` timeout checkpoint exists in ``dbos.operation_outputs``: a submit that lands
before would be served from the buffered message, a different path."""

from __future__ import annotations

import time
from collections.abc import Sequence

import sqlalchemy as sa

from _lib.db import Connect, rows
from dbos_agents import PendingCall
from dbos_agents.client import AgentClient

POLL_SEC = 0.005
"""Pending and armed polls: before t0, they only pace the loop."""

DONE = ("SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")

_ARMED_SQL = (
    "SELECT 1 FROM dbos.operation_outputs WHERE workflow_uuid = :wf"
    " AND function_name = 'DBOS.sleep' LIMIT 1"
)


def finish_times(
    engine: sa.Engine, wfs: Sequence[str], connect: Connect = sa.Engine.connect
) -> dict[str, tuple[str, float | None]]:
    """workflow id -> (DBOS status, outcome-recorded epoch ms or None if not finished)."""
    sql = "SELECT workflow_uuid, status, updated_at FROM dbos.workflow_status"
    return {
        r.workflow_uuid: (r.status, float(r.updated_at) if r.status in DONE else None)
        for r in rows(engine, sql + " WHERE workflow_uuid = ANY(:wfs)", connect, wfs=list(wfs))
    }


def tool_message_times(
    engine: sa.Engine, sids: Sequence[str], connect: Connect = sa.Engine.connect
) -> dict[str, float]:
    """session id -> epoch ms at which the transaction recording the tool message began."""
    sql = (
        "SELECT session_id, extract(epoch FROM created_at) * 1000 AS ms"
        " FROM dbos_agents.messages WHERE session_id = ANY(:s) AND role = 'tool'"
    )
    return {r.session_id: float(r.ms) for r in rows(engine, sql, connect, s=list(sids))}


def wait_armed(engine: sa.Engine, wf: str, deadline: float | None = None) -> None:
    """Poll until the workflow ``wf`` sits in ``recv``."""
    deadline = deadline or time.monotonic() + 60
    while not rows(engine, _ARMED_SQL, wf=wf):
        if time.monotonic() > deadline:
            raise TimeoutError(f"workflow {wf} never reached recv")
        time.sleep(POLL_SEC)


def wait_pending_armed(client: AgentClient, sid: str, wf: str | None = None) -> PendingCall:
    """Poll until the session's pending call exists and its workflow (``wf``, else the
    call's owner) sits in ``recv``; returns the call."""
    deadline = time.monotonic() + 60
    while not (calls := client.pending(session_id=sid)):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no pending row for {sid}")
        time.sleep(POLL_SEC)
    wait_armed(client.engine, wf or calls[0].owner_workflow_id, deadline)
    return calls[0]


def timed_submit(client: AgentClient, sid: str, tool_call_id: str) -> tuple[float, float]:
    """(t0 epoch s, call duration ms); t0 taken in this thread just before the call."""
    t0 = time.time()
    p0 = time.perf_counter()
    out = client.submit_tool_result(sid, tool_call_id, result={"ok": True, "note": "bench"})
    dur = (time.perf_counter() - p0) * 1000
    if out.status != "accepted":
        raise RuntimeError(f"submit for {sid} was {out.status} ({out.reason})")
    return t0, dur
