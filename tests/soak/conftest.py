"""Soak fixtures: a private Postgres cluster (never the shared server) and a run directory
that outlives the test, for post-mortems (witness, worker logs, report)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from dbos_agents.testing import PrivateCluster

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def private_cluster() -> Iterator[PrivateCluster]:
    with PrivateCluster() as pg:
        # PrivateCluster runs with synchronous_commit = off: an immediate stop then loses
        # commits the clients were told about, which no runtime can survive. Durable commits
        # (fsync stays off: the OS survives, only the postmaster dies).
        with psycopg.connect(pg.url, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET synchronous_commit = on")
            conn.execute("SELECT pg_reload_conf()")
        yield pg


@pytest.fixture
def soak_dir(request: pytest.FixtureRequest) -> Path:
    base = Path(os.environ.get("SOAK_DIR", REPO / ".dbos_agents" / "soak"))
    path = base / f"{request.node.name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    path.mkdir(parents=True, exist_ok=True)
    return path
