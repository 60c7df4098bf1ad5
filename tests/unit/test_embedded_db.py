"""Test-database provisioning and the embedded pgserver default."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa

from dbos_agents.store.embedded import (
    embedded_database_url,
    embedded_status,
    stop_embedded_database,
)
from dbos_agents.testing.database import (
    TEST_DATABASE_URL_ENV,
    create_fresh_database,
    drop_database,
    normalize_url,
    provision_test_database,
)
from dbos_agents.testing.embedded_server import open_embedded_server

LOCAL_SERVER_URL = os.environ.get(
    TEST_DATABASE_URL_ENV, "postgresql://postgres@127.0.0.1:5432/postgres"
)


def _select_one_psycopg(url: str) -> int:
    with psycopg.connect(url, connect_timeout=5) as conn:
        row = conn.execute("SELECT 1").fetchone()
    assert row is not None
    return int(row[0])


def _select_one_sqlalchemy(url: str) -> int:
    engine = sa.create_engine(sa.make_url(url).set(drivername="postgresql+psycopg"))
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.text("SELECT 1")).scalar_one())
    finally:
        engine.dispose()


@pytest.fixture
def local_server() -> str:
    try:
        _select_one_psycopg(LOCAL_SERVER_URL)
    except psycopg.OperationalError as exc:
        pytest.skip(f"no Postgres at {LOCAL_SERVER_URL}: {exc}")
    return LOCAL_SERVER_URL


@pytest.mark.integration
def test_create_fresh_database_then_drop(local_server: str) -> None:
    name = f"dbos_agents_t_{uuid.uuid4().hex[:12]}"
    driver_url = local_server.replace("postgresql://", "postgresql+psycopg://", 1)
    try:
        url = create_fresh_database(driver_url, name)
        assert url.startswith("postgresql://")
        assert sa.make_url(url).database == name
        assert _select_one_psycopg(url) == 1

        # A rerun starts clean even while a session still holds the old database.
        with psycopg.connect(url, autocommit=True) as held:
            held.execute("CREATE TABLE leftover (x int)")
            url_again = create_fresh_database(local_server, name)
        with psycopg.connect(url_again) as conn:
            assert conn.execute("SELECT to_regclass('leftover')").fetchone() == (None,)
    finally:
        drop_database(local_server, name)

    with pytest.raises(psycopg.OperationalError):
        _select_one_psycopg(url)
    drop_database(local_server, name)  # missing is fine


@pytest.mark.integration
def test_provision_prefers_env_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TEST_DATABASE_URL_ENV, "postgres://postgres@127.0.0.1:5432/postgres")
    started = time.monotonic()
    db = provision_test_database()
    assert time.monotonic() - started < 1.0
    assert db.source == "env"
    assert db.url == "postgresql://postgres@127.0.0.1:5432/postgres"
    db.close()
    db.close()


def test_normalize_url_forms() -> None:
    expected = "postgresql://u:p@h:5/d"
    for scheme in ("postgresql", "postgresql+psycopg", "postgres"):
        assert normalize_url(f"{scheme}://u:p@h:5/d") == expected
    with pytest.raises(ValueError):
        normalize_url("mysql://u@h/d")


@pytest.fixture
def pgdata(tmp_path: Path) -> Iterator[Path]:
    # The embedded server outlives its process by design; stop it before pytest prunes tmp_path.
    yield tmp_path
    stop_embedded_database(tmp_path)


@pytest.mark.integration
def test_embedded_database_url_is_usable_and_reused(pgdata: Path) -> None:
    url = embedded_database_url(pgdata)
    parsed = sa.make_url(url)
    assert parsed.drivername == "postgresql"
    assert parsed.host == "127.0.0.1"
    assert parsed.port is not None
    assert parsed.database == "dbos_agents"
    assert _select_one_psycopg(url) == 1
    assert _select_one_sqlalchemy(url) == 1

    started = time.monotonic()
    assert embedded_database_url(pgdata) == url
    assert time.monotonic() - started < 2.0

    # Racing creators of one database all succeed.
    with ThreadPoolExecutor(max_workers=4) as pool:
        urls = list(pool.map(lambda _: embedded_database_url(pgdata, "raced"), range(4)))
    assert len(set(urls)) == 1
    assert _select_one_psycopg(urls[0]) == 1

    # After a stop (e.g. a reboot) it comes back on the same port, so stored URLs stay valid.
    assert stop_embedded_database(pgdata)
    assert embedded_database_url(pgdata) == url
    assert _select_one_sqlalchemy(url) == 1


def _setting(url: str, name: str) -> str:
    with psycopg.connect(url, connect_timeout=5) as conn:
        row = conn.execute("SELECT current_setting(%s)", (name,)).fetchone()
    assert row is not None
    return str(row[0])


@pytest.mark.integration
def test_test_processes_share_the_embedded_server(pgdata: Path) -> None:
    """The processes of one run share the server: connections are raised only while no other
    holds it, and the process that started it stops it once the others let go."""
    first = open_embedded_server(pgdata, max_connections=150)
    assert first.started
    assert _setting(first.url, "max_connections") == "150"  # pgserver's initdb gives 100
    assert _setting(first.url, "synchronous_commit") == "off"

    second = open_embedded_server(pgdata, max_connections=300)
    assert not second.started and second.url == first.url
    assert _setting(first.url, "max_connections") == "150"  # not restarted under `first`

    first.close()  # `second` still holds it
    assert embedded_status(pgdata).state == "running"
    second.close()  # did not start it
    assert embedded_status(pgdata).state == "running"

    assert stop_embedded_database(pgdata)
    again = open_embedded_server(pgdata)
    assert again.started and again.url == first.url
    assert _setting(again.url, "max_connections") == "150"  # kept in the data directory
    again.close()
    again.close()
    assert embedded_status(pgdata).state == "stopped"
