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
