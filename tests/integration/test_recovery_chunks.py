"""Recovery re-enqueues a dead executor's PENDING workflows in chunks (``runtime/
_dbos_recovery``): exactly the rows DBOS's per-workflow recovery would, to the same values,
and nothing another executor holds. The rows here name a queue no worker serves, so the
running worker leaves them where recovery puts them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from dbos_agents import AgentRuntime
from dbos_agents._dbos import internals as compat
from dbos_agents._dbos import recovery as _dbos_recovery

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
QUEUE = "test-recovery-chunks-nobody"
COLUMNS = ("status", "owner_xid", "started_at_epoch_ms", "queue_name", "executor_id")


def _params() -> Any:
    from dbos._utils import GlobalParams

    return GlobalParams


@pytest.fixture
def rows() -> Iterator[list[str]]:
    made: list[str] = []
    yield made
    sys_db = compat._system_database()
    ws = sys_db.tables.workflow_status
    with sys_db.engine.begin() as conn:
        conn.execute(sa.delete(ws).where(ws.c.workflow_uuid.in_(made)))


def _insert(made: list[str], executor: str, status: str = "PENDING", version: str = "") -> str:
    sys_db = compat._system_database()
    ws = sys_db.tables.workflow_status
    wf = f"test-recovery-{uuid.uuid4().hex}"
    with sys_db.engine.begin() as conn:
        conn.execute(
            sa.insert(ws).values(
                workflow_uuid=wf,
                status=status,
                name="test-recovery-nothing",
                executor_id=executor,
                application_version=version or _params().app_version,
                application_name=sys_db.app_name,
                queue_name=QUEUE,
                priority=0,
                owner_xid="dead-owner",
                started_at_epoch_ms=1,
            )
        )
    made.append(wf)
    return wf


def _state(ids: list[str]) -> dict[str, tuple[Any, ...]]:
    sys_db = compat._system_database()
    ws = sys_db.tables.workflow_status
    with sys_db.engine.connect() as conn:
        got = conn.execute(
            sa.select(ws.c.workflow_uuid, *(ws.c[c] for c in COLUMNS)).where(
                ws.c.workflow_uuid.in_(ids)
            )
        ).all()
    return {r[0]: tuple(r[1:]) for r in got}


async def test_an_adopter_re_enqueues_exactly_the_dead_executors_pending_workflows(
    runtime: AgentRuntime, rows: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_dbos_recovery, "CHUNK", 2)  # five rows: three statements
    dead = f"dead-{uuid.uuid4().hex[:8]}"
    pending = [_insert(rows, dead) for _ in range(5)]
    others = [
        _insert(rows, f"alive-{uuid.uuid4().hex[:8]}"),  # another executor's
        _insert(rows, dead, status="SUCCESS"),  # ended
        _insert(rows, dead, version="some-older-version"),  # another version's
    ]
    before = _state(others)

    assert sorted(_dbos_recovery.recover_pending_workflows([dead])) == sorted(pending)

    after = _state(pending)
    assert set(after.values()) == {("ENQUEUED", None, None, QUEUE, dead)}
    assert _state(others) == before
    # A second adoption finds nothing left PENDING and changes nothing.
    assert _dbos_recovery.recover_pending_workflows([dead]) == []
    assert _state(pending) == after


async def test_the_chunked_re_enqueue_writes_what_dbos_writes(
    runtime: AgentRuntime, rows: list[str]
) -> None:
    dead = f"dead-{uuid.uuid4().hex[:8]}"
    ours, theirs = _insert(rows, dead), _insert(rows, dead)
    sys_db = compat._system_database()
    assert _dbos_recovery.reenqueue(sys_db, [ours], [dead]) == 1
    assert sys_db.reenqueue_for_recovery(theirs, [dead], "_dbos_internal_queue")
    state = _state([ours, theirs])
    assert state[ours] == state[theirs]
    # Dequeued by a live executor meanwhile: a late recovery leaves it alone.
    taken = _insert(rows, "alive")
    assert _dbos_recovery.reenqueue(sys_db, [taken], [dead]) == 0
    assert _state([taken])[taken][0] == "PENDING"


async def test_this_workers_launch_recovers_in_chunks(
    runtime: AgentRuntime, rows: list[str]
) -> None:
    from dbos import _dbos as dbos_module
    from dbos._sys_db import GetPendingWorkflowsOutput

    assert getattr(dbos_module, "startup_recovery_thread") is _dbos_recovery._startup_recovery  # noqa: B009
    mine = [_insert(rows, _params().executor_id) for _ in range(3)]
    _dbos_recovery._startup_recovery(
        compat._instance(), [GetPendingWorkflowsOutput(workflow_id=wf) for wf in mine]
    )
    assert {s[0] for s in _state(mine).values()} == {"ENQUEUED"}
