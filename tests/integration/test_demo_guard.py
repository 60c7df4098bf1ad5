"""``dbos-agents demo`` switches the real-model guard on: with an OpenAI key in the
environment its worker refuses to call the remote API, and the run says why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dbos_agents import AgentClient
from dbos_agents.models.guard import ALLOW_ENV, BLOCK_ENV

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


def test_the_demo_refuses_a_remote_model(fresh_database_url: str, tmp_path: Path) -> None:
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
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["status"] == "failed" and summary["refunds"] == 0, r.stderr[-3000:]
    with AgentClient(fresh_database_url) as client:
        error = client.session(summary["session_id"]).error or ""
    assert "real model requests are blocked" in error and ALLOW_ENV in error
