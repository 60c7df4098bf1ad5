"""Plans that do not depend on the planner's statistics.

A wait table that grew from nothing to thousands of open waits before the next ANALYZE (or
on a server whose autovacuum is off) must not make a run's end or an interrupt read every
open wait: at 10,000 open waits the end's close read them all through a BitmapAnd with the
partial open-waits index (1 ms per run end; the estimate was 88 rows). Each statement here
runs on a table that was never analyzed and must touch only the rows it names.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import sqlalchemy as sa

from dbos_agents.store import pending
from dbos_agents.store.db import create_sync_engine
from dbos_agents.store.migrate import migrate
from dbos_agents.store.pg import Stmt
from dbos_agents.testing import create_fresh_database, drop_database

pytestmark = pytest.mark.integration
OPEN = 20_000  # open waits of other sessions, none analyzed


@pytest.fixture(scope="module")
def engine(pg_server: str) -> Iterator[sa.Engine]:
    name = f"dbos_agents_t_plans_{os.getpid()}"
    url = create_fresh_database(pg_server, name)
    eng = create_sync_engine(url)
    migrate(eng)
    with eng.begin() as conn:
        for table in ("sessions", "pending_calls"):  # never analyzed, whatever the server
            conn.execute(sa.text(f"ALTER TABLE dbos_agents.{table} SET (autovacuum_enabled = off)"))
        conn.execute(
            sa.text(
                "INSERT INTO dbos_agents.sessions (id, root_session_id, agent, status, run_seq,"
                " workflow_id) SELECT 's' || i, 's' || i, 'a', 'running', 1, 's' || i"
                " FROM generate_series(0, :n) i"
            ),
            {"n": OPEN},
        )
        conn.execute(
            sa.text(
                "INSERT INTO dbos_agents.pending_calls (root_session_id, tool_call_id,"
                " owner_session_id, owner_workflow_id, kind, tool, arguments, deadline, status)"
                " SELECT 's' || i, 'c', 's' || i, 's' || i, 'client', 't', '{}',"
                " now() + interval '1 hour', 'waiting' FROM generate_series(0, :n) i"
            ),
            {"n": OPEN},
        )
        # What list_pending reads of DBOS's table, in a schema whose name needs quoting.
        conn.execute(sa.text('CREATE SCHEMA "sys q"'))
        conn.execute(
            sa.text(
                'CREATE TABLE "sys q".workflow_status (workflow_uuid text PRIMARY KEY, status text)'
            )
        )
        analyzed = conn.execute(
            sa.text(
                "SELECT count(*) FROM pg_stat_user_tables WHERE schemaname = 'dbos_agents'"
                " AND relname = 'pending_calls' AND (last_analyze IS NOT NULL"
                " OR last_autoanalyze IS NOT NULL)"
            )
        ).scalar_one()
        assert analyzed == 0
    yield eng
    eng.dispose()
    drop_database(pg_server, name)


def _most_rows(conn: sa.Connection, sql: str, params: Mapping[str, Any]) -> int:
    """The largest row count any node of the statement's executed plan produced."""
    plan = conn.execute(sa.text("EXPLAIN (ANALYZE, FORMAT JSON) " + sql), params).scalar_one()
    nodes = [(plan if isinstance(plan, list) else json.loads(plan))[0]["Plan"]]
    most = 0
    while nodes:
        node = nodes.pop()
        most = max(most, int(node["Actual Rows"]))
        nodes.extend(node.get("Plans", []))
    return most


@pytest.mark.parametrize(
    "stmt",
    [
        pending.close_open_stmt("s7", "run_completed", 1),
        pending.cancel_tree_stmt("s7"),
        pending.list_pending_stmt(session_id="s7", system_schema="sys q"),
    ],
    ids=["run_end", "interrupt", "list_of_a_session"],
)
def test_a_sessions_statements_read_only_its_waits(engine: sa.Engine, stmt: Stmt) -> None:
    sql, params = stmt
    with engine.connect() as conn:  # closed uncommitted: the updates roll back
        assert _most_rows(conn, sql, params) <= 1
