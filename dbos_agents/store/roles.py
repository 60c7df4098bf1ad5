"""Application roles: Postgres roles that see only one user's (and tenant's) rows.

Migration 0008 puts row-level security on the ``dbos_agents`` tables; ``grant_app_role``
(``dbos-agents migrate --app-role NAME``) creates and registers a role those policies
restrict, and grants it what they allow. Application code that connects as a member of it
names the user (and tenant) per transaction with ``set_identity``; with none named it sees
nothing. Workers keep running as the owner of the tables, which the policies do not bind.
"""

from __future__ import annotations

import re

import sqlalchemy as sa

from ..errors import ConfigurationError
from .schema import SCHEMA as S

_ROLE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
READ_ONLY = (
    "messages",
    "tool_calls",
    "pending_calls",
    "usage",
    "runs",
    "deltas",
    "session_states",
    "durable_tools",
    "tool_steps",
)


def grant_app_role(engine: sa.Engine, role: str) -> bool:
    """Create ``role`` (NOLOGIN) if missing, register it as an application role and grant
    it: sessions (read, create, update: the policies keep it to its own), messages, tool
    calls, pending calls and usage (read). Returns True when the role was created. Refuses a
    role that RLS would not bind (a superuser or BYPASSRLS role)."""
    if not _ROLE.match(role):
        raise ConfigurationError(
            f"application role {role!r}: use lower-case letters, digits and _ (max 63)"
        )
    with engine.begin() as conn:
        row = conn.execute(
            sa.text("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = :r"), {"r": role}
        ).first()
        if row is not None and (row.rolsuper or row.rolbypassrls):
            raise ConfigurationError(
                f"role {role!r} is a superuser or has BYPASSRLS: row-level security would"
                " not restrict it"
            )
        if row is None:
            conn.execute(sa.text(f'CREATE ROLE "{role}" NOLOGIN'))
        conn.execute(
            sa.text(f"INSERT INTO {S}.app_roles (role_name) VALUES (:r) ON CONFLICT DO NOTHING"),
            {"r": role},
        )
        conn.execute(sa.text(f'GRANT USAGE ON SCHEMA {S} TO "{role}"'))
        conn.execute(sa.text(f'GRANT SELECT, INSERT, UPDATE ON {S}.sessions TO "{role}"'))
        tables = ", ".join(f"{S}.{t}" for t in READ_ONLY)
        conn.execute(sa.text(f'GRANT SELECT ON {tables} TO "{role}"'))
    return row is None


def set_identity(conn: sa.Connection, user_id: str, tenant_id: str | None = None) -> None:
    """Name the user (and tenant) whose rows an application role may see, for the current
    transaction only (``set_config(..., true)``: nothing leaks to the pooled connection's
    next transaction)."""
    conn.execute(
        sa.text(
            "SELECT set_config('dbos_agents.user_id', :u, true),"
            " set_config('dbos_agents.tenant_id', :t, true)"
        ),
        {"u": user_id, "t": tenant_id or ""},
    )
