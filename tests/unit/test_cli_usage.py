"""Usage errors (a missing argument, a bad value, an unknown command or option) are one
line ``error [INVALID_USAGE] ...`` with exit status 2, like every other error of the CLI,
not click's multi-line usage box."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent / "dbos-agents"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, cwd=cwd, timeout=60)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["start"], "Missing argument"),
        (["start", "support"], "Missing argument"),
        (["sessions", "--limit", "0"], "--limit"),
        (["sessions", "--limit", "many"], "--limit"),
        (["sessions", "--nope"], "--nope"),
        (["nope"], "nope"),
        (["--nope", "sessions"], "--nope"),
        (["submit", "S", "C"], "exactly one of"),
        (["db", "nope"], "nope"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else None,
)
def test_usage_errors_are_one_line_with_exit_2(args: list[str], says: str, tmp_path: Path) -> None:
    r = _cli(*args, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("error [INVALID_USAGE] ") and says in line, line
    assert "--help" in line  # where to look next
    assert r.stdout == ""
    assert not (tmp_path / ".dbos_agents").exists()  # no database for a usage error


def test_usage_errors_under_json_are_one_document(tmp_path: Path) -> None:
    r = _cli("start", "--json", cwd=tmp_path)
    assert r.returncode == 2
    body = json.loads(r.stdout)
    assert body["error"] == "INVALID_USAGE" and body["exit_code"] == 2
    assert "Missing argument" in body["message"]


def test_no_arguments_still_prints_the_help(tmp_path: Path) -> None:
    r = _cli(cwd=tmp_path)
    assert "Usage: dbos-agents" in r.stdout + r.stderr
    assert "error [" not in r.stdout + r.stderr
