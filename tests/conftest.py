"""One fixture decides where Postgres comes from; tests do not care (DESIGN §9)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import psycopg
import pytest

from dbos_agents.testing import create_fresh_database, drop_database, provision_test_database
from dbos_agents.testing.database import TEST_DATABASE_URL_ENV

FAST_PATHS = os.environ.get("DBOS_AGENTS_DBOS_FAST_PATHS", "true").lower() not in ("false", "0")
needs_fast_paths = pytest.mark.skipif(
    not FAST_PATHS,
    reason="tests a fast path (dbos_agents._dbos); DBOS_AGENTS_DBOS_FAST_PATHS=false is set",
)
"""For tests of what only the fast paths do (a start claimed at once, a parked wait)."""

# No test calls a real model API by accident (dbos_agents.testing.guard); workers inherit it.
pytest_plugins = ["dbos_agents.testing.pytest_plugin"]


CONNECTIONS_PER_WORKER = 45
"""What one pytest process holds at its peak (worker subprocesses, pools, listeners): 3
processes peaked at 133 on the full suite."""


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``pytest -n auto``: one process more than the cores (the tests mostly wait on
    Postgres and subprocesses), as many as the test server's ``max_connections`` holds;
    0 (no workers, one process) without a server URL or with fewer than 2 that fit."""
    url = os.environ.get(TEST_DATABASE_URL_ENV, "").strip()
    if not url:
        return 0  # testcontainers or the embedded server: one per process would be started
    try:
        with psycopg.connect(url, connect_timeout=5) as conn:
            row = conn.execute("SELECT current_setting('max_connections')::int").fetchone()
    except psycopg.Error:
        return 0  # the session fixture reports it
    spare = (row[0] if row else 0) - 10
    workers = min((os.cpu_count() or 1) + 1, spare // CONNECTIONS_PER_WORKER)
    return workers if workers >= 2 else 0


FIRST = ("tests/upgrade/",)
"""Modules that take a minute or more in one process: scheduled first, so ``-n auto`` does
not end with one process running them while the others idle (``--dist loadfile`` hands
out modules in collection order)."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def first(item: pytest.Item) -> bool:
        path = item.path.relative_to(config.rootpath).as_posix()
        return path.startswith(FIRST)

    items.sort(key=lambda item: not first(item))  # stable: the rest keep their order


def _say(config: pytest.Config, line: str) -> None:
    """One line on the terminal even while output is captured (CI logs show the source)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None:
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line(line)


@pytest.fixture(scope="session")
def pg_server(pytestconfig: pytest.Config) -> Iterator[str]:
    """A Postgres *server* URL: env var, testcontainers (Docker only) or embedded pgserver."""
    db = provision_test_database()
    if db.source == "testcontainers":
        _say(pytestconfig, f"test database: container {db.container_id} started from {db.image}")
    try:
        yield db.url
    finally:
        db.close()
        if db.source == "testcontainers":
            _say(pytestconfig, f"test database: container {db.container_id} stopped")


@pytest.fixture(scope="module")
def fresh_database_url(pg_server: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A database of its own for one test module: DBOS state never leaks between modules."""
    name = f"dbos_agents_t_{request.module.__name__.rsplit('.', 1)[-1]}_{os.getpid()}"[:63]
    url = create_fresh_database(pg_server, name)
    yield url
    drop_database(pg_server, name)
