"""``dbos-agents demo`` never calls a real model: with an OpenAI key in the environment it
still runs its scripted model (its workers get no key), says so, and shows it all. The
real-model guard stays on for its workers too (``tests/unit/test_guard.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dbos_agents.models.guard import ALLOW_ENV, BLOCK_ENV

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


def test_the_demo_ignores_an_openai_key(fresh_database_url: str, tmp_path: Path) -> None:
    """With the key set the session failed on the guard, the demo hid why and exited 0."""
    env = {k: v for k, v in os.environ.items() if k not in (BLOCK_ENV, ALLOW_ENV)}
    env.update(
        OPENAI_API_KEY="sk-test-not-a-real-key",
        # Remote, and resolves nowhere: even without the guard nothing real is reached.
        OPENAI_BASE_URL="http://models.example.invalid/v1",
        DBOS_AGENTS_DATA_DIR=str(tmp_path),
    )
    r = subprocess.run(
        [sys.executable, "-m", "dbos_agents.cli", "demo", "--database-url", fresh_database_url,
         "--json"],
        capture_output=True, text=True, timeout=300, cwd=REPO, env=env,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["status"] == "completed" and summary["refunds"] == 1
    assert summary["crashed_and_recovered"] is True
    assert "OPENAI_API_KEY" in r.stderr and "scripted" in r.stderr
