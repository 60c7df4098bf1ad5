"""One fixture decides where Postgres comes from; tests do not care (DESIGN §9)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy.engine import make_url

from dbos_agents.testing import (
    ProvisionedDatabase,
    create_fresh_database,
    drop_database,
    provision_test_database,
)
from dbos_agents.testing.database import TEST_DATABASE_URL_ENV, choose_source

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
SPARE_CONNECTIONS = 10
PROCESSES = (os.cpu_count() or 1) + 1
"""One process more than the cores: the tests mostly wait on Postgres and subprocesses."""
EMBEDDED_MAX_CONNECTIONS = max(200, PROCESSES * CONNECTIONS_PER_WORKER + SPARE_CONNECTIONS)
"""What the embedded server is given for ``-n auto``: all the processes, with headroom."""
SHARED = pytest.StashKey[ProvisionedDatabase]()


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``pytest -n auto``: :data:`PROCESSES`, as many as the test server's
    ``max_connections`` holds; 0 (no workers, one process) with fewer than 2 that fit or
    with testcontainers (a container per process)."""
    url = os.environ.get(TEST_DATABASE_URL_ENV, "").strip()
    try:
        if choose_source() == "pgserver":
            url = _share_embedded_server(config)
    except Exception:
        return 0  # the session fixture meets the same error and reports it
    if not url:
        return 0
    try:
        with psycopg.connect(url, connect_timeout=5) as conn:
            row = conn.execute("SELECT current_setting('max_connections')::int").fetchone()
    except psycopg.Error:
        return 0  # the session fixture reports it
    spare = (row[0] if row else 0) - SPARE_CONNECTIONS
    workers = min(PROCESSES, spare // CONNECTIONS_PER_WORKER)
    return workers if workers >= 2 else 0


def _share_embedded_server(config: pytest.Config) -> str:
    """Start the embedded server once, here in the first process, for all the processes:
    they inherit its URL and each makes its own databases on it, as with a server URL. The
    run stops it at its end when it started it (``ProvisionedDatabase.close``)."""
    db = provision_test_database(mode="pgserver", max_connections=EMBEDDED_MAX_CONNECTIONS)
    config.add_cleanup(db.close)
    config.stash[SHARED] = db
    os.environ.setdefault(TEST_DATABASE_URL_ENV, db.url)
    return db.url


def pytest_sessionstart(session: pytest.Session) -> None:
    db = session.config.stash.get(SHARED, None)
    if db is not None:
        processes = getattr(session.config.option, "numprocesses", None) or 1
        _say(session.config, f"test database: {_embedded(db, processes)}")


FIRST = (
    "tests/soak/",
    "tests/upgrade/",
    "tests/crash/test_stream_crash.py",
    "tests/http/test_fuzz.py",
    "tests/crash/test_mixed_fleet.py",
    "tests/crash/test_stale_writer.py",
    "tests/chat/test_chat_page_tutorial.py",
    "tests/outage/",
    "tests/newcomer/",
    "tests/integration/test_cli.py",
)
"""The modules with the longest tests (docs/testing.md), longest first: scheduled before
the rest, so ``-n auto`` does not end with one process running one of them while the others
idle (``--dist loadfile`` hands out modules in collection order; xdist's own reordering by
number of tests, which puts these few-test modules last, is turned off below)."""


def pytest_configure(config: pytest.Config) -> None:
    config.option.loadscopereorder = False  # keep FIRST first (xdist reads it at scheduling)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        path = item.path.relative_to(config.rootpath).as_posix()
        return next((i for i, prefix in enumerate(FIRST) if path.startswith(prefix)), len(FIRST))

    items.sort(key=rank)  # stable: the rest keep their order


def _say(config: pytest.Config, line: str) -> None:
    """One line on the terminal even while output is captured (CI logs show the source)."""
    if hasattr(config, "workerinput"):
        return  # an xdist worker: its output is not the terminal's
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
    elif db.source == "pgserver":
        _say(pytestconfig, f"test database: {_embedded(db)}")
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


def _embedded(db: ProvisionedDatabase, processes: int = 1) -> str:
    where = f"the embedded Postgres in {db.data_dir} on 127.0.0.1:{make_url(db.url).port}"
    shared = f"shared by {processes} processes, " if processes > 1 else ""
    return f"{where} ({shared}stopped at the end if this run started it)"
