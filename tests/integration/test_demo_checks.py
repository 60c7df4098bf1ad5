"""``dbos-agents demo`` checks what it claims (the crash, one refund, completed runs) and
fails with the reason when it could not show it, instead of exiting 0 over nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dbos_agents.demo import APP

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


def _demo(url: str, data: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dbos_agents.cli", "demo", "--database-url", url, *extra],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env={**os.environ, "DBOS_AGENTS_DATA_DIR": str(data)},
    )


def test_the_demo_refuses_to_run_beside_another_worker(
    fresh_database_url: str, tmp_path: Path
) -> None:
    """The worker of the demo's own next steps, still running, took its session: the demo
    exited 0 with no crash and "refunds at the provider: 0"."""
    url = fresh_database_url
    log = tmp_path / "worker.log"
    with log.open("w") as f:
        worker = subprocess.Popen(
            [sys.executable, "-m", "dbos_agents.cli", "worker", "--app", APP, "--database-url", url],
            stdout=f, stderr=subprocess.STDOUT, cwd=tmp_path,
            env={**os.environ, "DBOS_AGENTS_EXECUTOR_ID": "next-steps-worker"},
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while "dbos-agents worker ready" not in log.read_text():
            assert worker.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        r = _demo(url, tmp_path / "data")
        j = _demo(url, tmp_path / "data", "--json")
    finally:
        worker.terminate()
        assert worker.wait(timeout=60) == 0
    assert r.returncode == 16, r.stdout[-3000:]  # DEMO_FAILED
    (line,) = [x for x in r.stderr.splitlines() if x.startswith("error [")]
    assert line.startswith("error [DEMO_FAILED]") and "another worker" in line
    assert "next-steps-worker" in line and f"pid {worker.pid}" in line
    assert "Ctrl-C" in line and f"kill {worker.pid}" in line
    assert "refunds at the provider" not in r.stdout
    body = json.loads(j.stdout)
    assert j.returncode == r.returncode and body["error"] == "DEMO_FAILED", j.stdout


def test_after_the_other_worker_stopped_the_demo_shows_it_all(
    fresh_database_url: str, tmp_path: Path
) -> None:
    r = _demo(fresh_database_url, tmp_path / "data", "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads(r.stdout)
    assert summary["crashed_and_recovered"] is True and summary["refunds"] == 1
    assert summary["status"] == "completed"
