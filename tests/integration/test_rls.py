"""Row-level security: an application role sees only its user's (and tenant's) rows.

Connects as a real non-superuser login role (superusers bypass RLS), member of the role
``dbos-agents migrate --app-role`` grants.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from dbos_agents.store.db import create_sync_engine, sqlalchemy_url
from dbos_agents.store.migrate import prepare_database
from dbos_agents.store.roles import grant_app_role, set_identity

pytestmark = pytest.mark.integration
APP = f"dbos_agents_app_t{os.getpid()}"
LOGIN = f"dbos_agents_login_t{os.getpid()}"
SERVICE = f"dbos_agents_service_t{os.getpid()}"
PASSWORD = secrets.token_hex(16)  # servers with password auth (testcontainers) need one
ROWS = {  # session id: (user, tenant)
    "s_alice": ("alice", "t1"),
    "s_alice_t2": ("alice", "t2"),
    "s_bob": ("bob", "t1"),
    "s_anon": (None, None),
}


def _seed(conn: sa.Connection) -> None:
    for sid, (u, t) in ROWS.items():
        conn.execute(
            sa.text(
                "INSERT INTO dbos_agents.sessions (id, root_session_id, agent, status, user_id,"
                " tenant_id, run_seq, workflow_id) VALUES (:s, :s, 'chat', 'completed', :u, :t,"
                " 1, :s)"
            ),
            {"s": sid, "u": u, "t": t},
        )
        conn.execute(
            sa.text(
                "INSERT INTO dbos_agents.messages (session_id, seq, run_seq, role, content,"
                " tool_calls, user_id, tenant_id) VALUES (:s, 1, 1, 'user', 'hi', '[]', :u, :t)"
            ),
            {"s": sid, "u": u, "t": t},
        )
        conn.execute(
            sa.text(
                "INSERT INTO dbos_agents.tool_calls (session_id, tool_call_id, run_seq, turn,"
                " tool, arguments, idempotency_key, safe_to_retry, status) VALUES"
                " (:s, 'c1', 1, 1, 'refund', '{}', :s || 'k', false, 'completed')"
            ),
            {"s": sid},
        )
        conn.execute(
            sa.text(
                "INSERT INTO dbos_agents.usage (session_id, run_seq, turn, input_tokens,"
                " output_tokens, cost_usd, tenant_id) VALUES (:s, 1, 1, 1, 1, 0, :t)"
            ),
            {"s": sid, "t": t},
        )
        conn.execute(
            sa.text(
                "INSERT INTO dbos_agents.pending_calls (root_session_id, tool_call_id,"
                " owner_session_id, owner_workflow_id, kind, tool, arguments, deadline, status,"
                " user_id, tenant_id) VALUES (:s, 'c1', :s, :s, 'client', 'confirm', '{}',"
                " now() + interval '1 hour', 'waiting', :u, :t)"
            ),
            {"s": sid, "u": u, "t": t},
        )


@pytest.fixture(scope="module")
def engines(fresh_database_url: str) -> Iterator[tuple[sa.Engine, sa.Engine, sa.Engine]]:
    prepare_database(fresh_database_url)
    owner = create_sync_engine(fresh_database_url)
    with owner.begin() as conn:
        _seed(conn)
    assert grant_app_role(owner, APP) is True
    assert grant_app_role(owner, APP) is False  # idempotent
    with owner.begin() as conn:
        for role in (LOGIN, SERVICE):
            conn.execute(sa.text(f'DROP ROLE IF EXISTS "{role}"'))
            conn.execute(sa.text(f"CREATE ROLE \"{role}\" LOGIN PASSWORD '{PASSWORD}'"))
        conn.execute(sa.text(f'GRANT "{APP}" TO "{LOGIN}"'))
        conn.execute(sa.text(f'GRANT USAGE ON SCHEMA dbos_agents TO "{SERVICE}"'))
        conn.execute(sa.text(f'GRANT SELECT ON ALL TABLES IN SCHEMA dbos_agents TO "{SERVICE}"'))
    base = make_url(sqlalchemy_url(fresh_database_url))
    app = sa.create_engine(base.set(username=LOGIN, password=PASSWORD))
    service = sa.create_engine(base.set(username=SERVICE, password=PASSWORD))
    yield owner, app, service
    app.dispose()
    service.dispose()
    with owner.begin() as conn:
        for role in (LOGIN, SERVICE, APP):
            conn.execute(sa.text(f'DROP OWNED BY "{role}"'))
            conn.execute(sa.text(f'DROP ROLE IF EXISTS "{role}"'))
    owner.dispose()


def _ids(conn: sa.Connection, table: str, col: str = "session_id") -> set[str]:
    return {r[0] for r in conn.execute(sa.text(f"SELECT {col} FROM dbos_agents.{table}"))}


def _visible(app: sa.Engine, user: str | None, tenant: str | None) -> dict[str, set[str]]:
    with app.begin() as conn:
        if user is not None:
            set_identity(conn, user, tenant)
        return {
            "sessions": _ids(conn, "sessions", "id"),
            "messages": _ids(conn, "messages"),
            "tool_calls": _ids(conn, "tool_calls"),
            "usage": _ids(conn, "usage"),
            "pending_calls": _ids(conn, "pending_calls", "root_session_id"),
        }


def test_the_app_role_sees_only_its_user_and_tenant(
    engines: tuple[sa.Engine, sa.Engine, sa.Engine],
) -> None:
    owner, app, service = engines
    every = {
        k: {"s_alice"} for k in ("sessions", "messages", "tool_calls", "usage", "pending_calls")
    }
    assert _visible(app, "alice", "t1") == every
    both = {"s_alice", "s_alice_t2"}
    assert _visible(app, "alice", None) == {k: both for k in every}
    assert _visible(app, "bob", "t2") == {k: set() for k in every}
    assert _visible(app, None, None) == {k: set() for k in every}  # nobody named: nothing
    # The identity is transaction-local: the next transaction on the same pool sees nothing.
    assert _visible(app, None, None) == {k: set() for k in every}
    all_ids = set(ROWS)
    with owner.connect() as conn:
        assert _ids(conn, "sessions", "id") == all_ids  # the owner (workers) is not bound
    with service.connect() as conn:
        assert _ids(conn, "messages") == all_ids  # nor a service role that is no app role


def test_the_app_role_cannot_write_what_it_must_not(
    engines: tuple[sa.Engine, sa.Engine, sa.Engine],
) -> None:
    owner, app, _ = engines
    refused = [
        "INSERT INTO dbos_agents.messages (session_id, seq, run_seq, role, content, tool_calls,"
        " user_id, tenant_id) VALUES ('s_alice', 2, 1, 'assistant', 'forged', '[]', 'alice', 't1')",
        "INSERT INTO dbos_agents.sessions (id, root_session_id, agent, status, user_id,"
        " tenant_id, run_seq, workflow_id) VALUES ('s_x', 's_x', 'chat', 'queued', 'bob', 't1',"
        " 1, 's_x')",
        "UPDATE dbos_agents.tool_calls SET status = 'failed'",
        "DELETE FROM dbos_agents.sessions",
        "SELECT * FROM dbos_agents.workers",
    ]
    for sql in refused:
        with app.connect() as conn, conn.begin():
            set_identity(conn, "alice", "t1")
            with pytest.raises(sa.exc.ProgrammingError):
                conn.execute(sa.text(sql))
    with app.begin() as conn:  # another user's session: the update touches nothing
        set_identity(conn, "alice", "t1")
        n = conn.execute(
            sa.text("UPDATE dbos_agents.sessions SET status = 'failed' WHERE id = 's_bob'")
        )
        assert n.rowcount == 0
        mine = conn.execute(
            sa.text(
                "INSERT INTO dbos_agents.sessions (id, root_session_id, agent, status, user_id,"
                " tenant_id, run_seq, workflow_id) VALUES ('s_new', 's_new', 'chat', 'queued',"
                " 'alice', 't1', 1, 's_new')"
            )
        )
        assert mine.rowcount == 1  # creating a session as itself is allowed
    with owner.connect() as conn:
        status = conn.execute(sa.text("SELECT status FROM dbos_agents.sessions WHERE id = 's_bob'"))
        assert status.scalar_one() == "completed"
        assert _ids(conn, "messages") == set(ROWS)
