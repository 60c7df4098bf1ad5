"""``dbos-agents serve`` on a busy port (issue 29, item 9e): one line naming the port and an
exit code of its own (14, PORT_IN_USE), not uvicorn's 3 (``already_completed`` in the docs)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from dbos_agents.cli import EXIT_CODES

REPO = Path(__file__).resolve().parents[2]


def _serve(port: int, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DBOS_AGENTS_DATABASE_URL": "postgresql://postgres@127.0.0.1:1/none"}
    cli = [sys.executable, "-m", "dbos_agents.cli", "serve", "--allow-unauthenticated"]
    return subprocess.run(
        [*cli, "--port", str(port), *extra],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=60,
    )


def test_a_busy_port_is_one_line_and_exit_code_14() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = _serve(port)
        as_json = _serve(port, "--json")
    assert EXIT_CODES["PORT_IN_USE"] == 14 and 14 not in [
        v for k, v in EXIT_CODES.items() if k != "PORT_IN_USE"
    ]
    assert out.returncode == 14, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "[PORT_IN_USE]" in lines[0] and f"127.0.0.1:{port}" in lines[0]
    doc = json.loads(as_json.stdout)
    assert (doc["error"], doc["exit_code"], as_json.returncode) == ("PORT_IN_USE", 14, 14)
