"""100,000 sessions parked on client tools in one worker (``-m slow``; about an hour).

Runs ``bench/parked.py`` (the worker in its own process) and checks what must hold at any
speed: every session parks, every submitted session resumes, the worker's threads stay
within 64 and its Postgres connections within ``Settings.max_database_connections()``.
The figures (RSS per session, time to park, latencies) are printed, never asserted: tests
do not assert on wall-clock time. ``DBOS_AGENTS_PARKED_SESSIONS`` changes the count.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dbos_agents.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
SESSIONS = int(os.environ.get("DBOS_AGENTS_PARKED_SESSIONS", "100000"))
MAX_THREADS = 64


@pytest.mark.timeout(4 * 3600)
def test_parked_sessions_stay_within_threads_and_connections(fresh_database_url: str) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "parked.py"),
            "--sessions",
            str(SESSIONS),
            "--burst",
            str(min(1000, SESSIONS // 10)),
            "--samples",
            "300",
            "--start-wave",
            "5000",
            "--database-url",
            fresh_database_url,
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    fig = result["figures"]
    print(proc.stderr[-6000:])  # the bench's tables, shown with -s
    assert fig["parked"] == SESSIONS
    assert fig["burst_done"] == fig["burst"]
    assert result["submit_errors"] == {}
    assert fig["max_threads"] <= MAX_THREADS
    assert fig["pg_conns_max"] <= Settings().max_database_connections()
