"""The README's first command, and the worker/migrate commands, as a user runs them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dbos_agents.store.migrate import load_migrations

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dbos_agents.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )


def test_demo_runs_and_prints_transcript_and_next_steps(fresh_database_url: str) -> None:
    r = _cli("demo", "--database-url", fresh_database_url)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "I refunded $249.00" in r.stdout
    assert "issue_refund" in r.stdout and "completed" in r.stdout
    assert "dbos-agents worker --app" in r.stdout
    # The worker was SIGKILLed after the refund ran; the resumed session did not pay twice.
    assert "died by SIGKILL" in r.stdout
    assert "refunds at the provider: 1" in r.stdout


def test_migrate_is_idempotent(fresh_database_url: str) -> None:
    for _ in range(2):
        r = _cli("migrate", "--database-url", fresh_database_url)
        assert r.returncode == 0, r.stderr
        assert f"version {len(load_migrations())}" in r.stdout


def test_migrate_against_a_dead_host_fails_fast_with_the_host(fresh_database_url: str) -> None:
    r = _cli("migrate", "--database-url", "postgresql://postgres@127.0.0.1:1/nowhere", timeout=60)
    assert r.returncode == 2
    assert "DATABASE_UNAVAILABLE" in r.stderr and "127.0.0.1:1/nowhere" in r.stderr


def test_worker_with_a_bad_app_spec_exits_with_a_clear_error() -> None:
    r = _cli("worker", "--app", "no_such_module:runtime")
    assert r.returncode == 2
    assert "cannot load 'no_such_module:runtime'" in r.stderr


def test_serve_refuses_to_start_without_authentication(fresh_database_url: str) -> None:
    r = _cli("serve", "--database-url", fresh_database_url, timeout=60)
    assert r.returncode == 2
    assert "INVALID_CONFIGURATION" in r.stderr and "allow_unauthenticated" in r.stderr
