"""Outage tests own a private Postgres cluster: they stop and restart it at will."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dbos_agents.testing import CrashHarness, PrivateCluster, create_fresh_database

REPO = Path(__file__).resolve().parents[2]
STALE_AFTER = 3.0
WORKER_ENV = {
    "DBOS_AGENTS_STALE_AFTER_SEC": str(STALE_AFTER),
    "DBOS_AGENTS_HEARTBEAT_INTERVAL_SEC": "0.5",
    "DBOS_AGENTS_SHUTDOWN_GRACE_SEC": "1",
    "DBOS_AGENTS_CONNECT_TIMEOUT_SEC": "2",
    "DBOS_AGENTS_LOG_LEVEL": "INFO",
}
_names = itertools.count()


@pytest.fixture(scope="module")
def cluster() -> Iterator[PrivateCluster]:
    with PrivateCluster() as pg:
        yield pg


@pytest.fixture
def make_harness(cluster: PrivateCluster, tmp_path: Path) -> Iterator[Callable[[], CrashHarness]]:
    """A harness on a fresh database of the private cluster (one per test)."""
    made: list[CrashHarness] = []

    def make() -> CrashHarness:
        if not cluster.is_running():
            cluster.start()
        url = create_fresh_database(cluster.url, f"outage_{next(_names)}")
        h = CrashHarness(
            "tests.crash.ops_app:runtime",
            url,
            witness=tmp_path / "witness.jsonl",
            log_dir=tmp_path / "logs",
            cwd=REPO,
            env=WORKER_ENV,
        )
        made.append(h)
        return h

    yield make
    for h in made:
        h.close()
