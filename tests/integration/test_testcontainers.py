"""The testcontainers path itself: a container per provision, gone after close.

Runs only in the forced leg (``DBOS_AGENTS_TEST_DATABASE=testcontainers``, see .ci/run and
docs/testing.md), where a Docker engine answers and the configured image can be had.
"""

from __future__ import annotations

import importlib
from typing import Any

import psycopg
import pytest

from dbos_agents.errors import DatabaseUnavailableError
from dbos_agents.testing.database import provision_test_database, resolve_image, resolve_mode

pytestmark = pytest.mark.skipif(
    resolve_mode() != "testcontainers",
    reason="only in the testcontainers leg (DBOS_AGENTS_TEST_DATABASE=testcontainers)",
)


def _container_ids() -> set[str]:
    docker: Any = importlib.import_module("docker")
    client = docker.from_env()
    try:
        return {c.short_id for c in client.containers.list(all=True)}
    finally:
        client.close()


def test_a_container_of_the_configured_image_is_removed_on_close() -> None:
    db = provision_test_database()
    try:
        assert db.source == "testcontainers"
        assert db.image == resolve_image()
        assert db.container_id in _container_ids()
        with psycopg.connect(db.url, connect_timeout=10) as conn:
            row = conn.execute("SELECT current_setting('fsync')").fetchone()
        assert row == ("off",)
    finally:
        db.close()
    assert db.container_id not in _container_ids()
    db.close()  # idempotent


def test_an_image_that_cannot_be_had_is_a_typed_error() -> None:
    before = _container_ids()
    with pytest.raises(DatabaseUnavailableError, match="postgres-image/build"):
        provision_test_database(image="dbos-agents/no-such-image:0")
    assert _container_ids() == before
