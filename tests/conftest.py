"""One fixture decides where Postgres comes from; tests do not care (DESIGN §9)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from dbos_agents.testing import create_fresh_database, drop_database, provision_test_database

# No test calls a real model API by accident (dbos_agents.testing.guard); workers inherit it.
pytest_plugins = ["dbos_agents.testing.pytest_plugin"]


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """A Postgres *server* URL: env var, testcontainers (Docker only) or embedded pgserver."""
    db = provision_test_database()
    try:
        yield db.url
    finally:
        db.close()


@pytest.fixture(scope="module")
def fresh_database_url(pg_server: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A database of its own for one test module: DBOS state never leaks between modules."""
    name = f"dbos_agents_t_{request.module.__name__.rsplit('.', 1)[-1]}_{os.getpid()}"[:63]
    url = create_fresh_database(pg_server, name)
    yield url
    drop_database(pg_server, name)
