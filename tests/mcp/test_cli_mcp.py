"""``dbos-agents mcp tools``: a server's tools with their hints and our policy, over stdio
(the test server, run as a command) and a server that does not answer (exit 18)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dbos_agents.cli", *args],
        cwd=REPO,  # the stdio command runs tests.mcp.server_app
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_tools_of_a_stdio_server_with_the_policy_each_gets(tmp_path: Path) -> None:
    command = shlex.join(
        [sys.executable, "-m", "tests.mcp.server_app", "--witness", str(tmp_path / "w")]
    )
    result = cli("mcp", "tools", command, "--trust-hints", "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout.strip().splitlines()[-1])
    policy = {t["name"]: t["runs_again"] for t in doc["tools"]}
    assert policy == {
        "create_ticket": False,
        "lookup": True,
        "set_status": True,
        "refund": False,
        "broken": False,
    }
    lookup = next(t for t in doc["tools"] if t["name"] == "lookup")
    assert lookup["hints"]["readOnlyHint"] is True
    assert lookup["reason"] == "readOnlyHint of a trusted server"
    untrusted = cli("mcp", "tools", command)
    assert untrusted.returncode == 0 and "readOnlyHint ignored" in untrusted.stdout
    assert not (tmp_path / "w").exists()  # listing runs no tool


def test_a_server_that_does_not_answer_exits_18() -> None:
    result = cli("mcp", "tools", "http://127.0.0.1:9/mcp", "--timeout", "1", "--json")
    assert result.returncode == 18, result.stderr
    assert json.loads(result.stdout)["error"] == "MCP_SERVER_ERROR"
