"""Upgrades: from every earlier schema version, with rows written under it, to the latest."""

from __future__ import annotations

import os

import pytest
import sqlalchemy as sa

from dbos_agents.store import queries
from dbos_agents.store.db import create_sync_engine
from dbos_agents.store.migrate import current_version, load_migrations, migrate
from dbos_agents.testing import create_fresh_database, drop_database

pytestmark = pytest.mark.integration
LATEST = len(load_migrations())


@pytest.mark.parametrize("start", range(0, LATEST))
def test_upgrade_from_every_earlier_version_keeps_the_rows(pg_server: str, start: int) -> None:
    name = f"dbos_agents_t_upgrade_{start}_{os.getpid()}"
    url = create_fresh_database(pg_server, name)
    engine = create_sync_engine(url)
    try:
        if start:
            assert migrate(engine, upto=start) == list(range(1, start + 1))
            with engine.begin() as conn:  # rows written by that version's code
                conn.execute(
                    sa.text(
                        "INSERT INTO dbos_agents.sessions (id, root_session_id, agent, status,"
                        " user_id, tenant_id, run_seq, workflow_id, final_output) VALUES"
                        " ('s_old', 's_old', 'chat', 'completed', 'u1', 't1', 1, 's_old', 'done')"
                    )
                )
                conn.execute(
                    sa.text(
                        "INSERT INTO dbos_agents.messages (session_id, seq, run_seq, role,"
                        " content) VALUES ('s_old', 1, 1, 'user', 'hi')"
                    )
                )
        assert migrate(engine) == list(range(start + 1, LATEST + 1))
        assert current_version(engine) == LATEST
        assert migrate(engine) == []
        if start:
            info = queries.get_session(engine, "s_old")
            assert info is not None and (info.status, info.final_output) == ("completed", "done")
            assert [m.content for m in queries.history(engine, "s_old")] == ["hi"]
    finally:
        engine.dispose()
        drop_database(pg_server, name)


def test_deleting_a_session_deletes_the_rows_of_its_turns(pg_server: str) -> None:
    """The rows a turn writes (messages, ledger, usage, live pieces) go with their session,
    as an ON DELETE CASCADE would take them, and nobody else's do."""
    name = f"dbos_agents_t_delete_session_{os.getpid()}"
    engine = create_sync_engine(create_fresh_database(pg_server, name))
    tables = ("messages", "tool_calls", "usage", "deltas")
    try:
        migrate(engine)
        with engine.begin() as conn:
            for sid in ("s_gone", "s_kept"):
                conn.execute(
                    sa.text(
                        "INSERT INTO dbos_agents.sessions (id, root_session_id, agent, status,"
                        " user_id, tenant_id, run_seq, workflow_id) VALUES"
                        " (:s, :s, 'chat', 'completed', 'u1', 't1', 1, :s)"
                    ),
                    {"s": sid},
                )
                for sql in (
                    "INSERT INTO dbos_agents.messages (session_id, seq, run_seq, role, content)"
                    " VALUES (:s, 1, 1, 'user', 'hi')",
                    "INSERT INTO dbos_agents.tool_calls (session_id, tool_call_id, run_seq, turn,"
                    " tool, arguments, idempotency_key, safe_to_retry, status)"
                    " VALUES (:s, 'c1', 1, 1, 'charge', '{}', 'k', false, 'requested')",
                    "INSERT INTO dbos_agents.usage (session_id, run_seq, turn, input_tokens,"
                    " output_tokens, cost_usd) VALUES (:s, 1, 1, 1, 1, 0)",
                    "INSERT INTO dbos_agents.deltas (session_id, after_seq, run_seq, turn, attempt,"
                    " part, kind) VALUES (:s, 1, 1, 1, 1, 0, 'text')",
                ):
                    conn.execute(sa.text(sql), {"s": sid})
        with engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM dbos_agents.sessions WHERE id = 's_gone'"))
        with engine.connect() as conn:
            for table in tables:
                left = conn.execute(
                    sa.text(f"SELECT DISTINCT session_id FROM dbos_agents.{table}")
                ).scalars()
                assert set(left) == {"s_kept"}, table
    finally:
        engine.dispose()
        drop_database(pg_server, name)
