"""``dbos-agents serve --workers N``: N server processes on one port, each with the hook
named by ``--auth``, stopped together by one SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.integration

HOOKS = """\
import os
from pathlib import Path

from dbos_agents.server import Principal


def authenticate(request, operation, session_id):
    with open(Path(__file__).with_name("pids"), "a") as f:
        f.write(f"{os.getpid()}\\n")
    user = request.headers.get("x-user")
    return Principal(subject=user, user_id=user) if user else None
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def _children(pid: int) -> set[int]:
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid and b"resource_tracker" not in cmdline:
                out.add(int(entry.name))
    return out


def _up(base: str, proc: subprocess.Popen[str], log: Path) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"serve exited {proc.returncode}: {log.read_text()[-2000:]}"
        try:
            if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"serve not up: {log.read_text()[-2000:]}")


def test_workers_share_the_port_and_the_hook_and_stop_on_one_sigterm(
    fresh_database_url: str, tmp_path: Path
) -> None:
    migrate = subprocess.run(
        [sys.executable, "-m", "dbos_agents.cli", "migrate", "--database-url", fresh_database_url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert migrate.returncode == 0, migrate.stderr
    (tmp_path / "myhooks.py").write_text(HOOKS)
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    argv = [sys.executable, "-m", "dbos_agents.cli", "serve", "--workers", "2"]
    argv += ["--auth", "myhooks:authenticate", "--port", str(port)]
    argv += ["--database-url", fresh_database_url]
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=out, stderr=out, text=True)
    try:
        _up(base, proc, log)
        workers = _children(proc.pid)
        assert len(workers) == 2, workers
        # Every process answers with the hook it loaded from the folder: a caller it names
        # sees its (empty) list, an anonymous one gets 401. New connections until both
        # processes have taken some.
        served: set[int] = set()
        deadline = time.monotonic() + 30
        while served != workers and time.monotonic() < deadline:
            with httpx.Client(base_url=base, timeout=10) as c:
                assert c.get("/sessions", headers={"x-user": "ann"}).status_code == 200
            with httpx.Client(base_url=base, timeout=10) as c:
                assert c.get("/sessions").status_code == 401
            served = {int(p) for p in (tmp_path / "pids").read_text().split()}
        assert served == workers
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, log.read_text()[-2000:]
        assert not any(Path(f"/proc/{w}").exists() for w in workers)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_workers_refuse_a_hook_object_and_a_count_below_one() -> None:
    from dbos_agents.errors import ConfigurationError
    from dbos_agents.server import ServerSettings, serve

    settings = ServerSettings(database_url="postgresql://x@127.0.0.1:1/x", port=_free_port())
    with pytest.raises(ConfigurationError, match=r"settings\.authenticate"):
        serve(settings, authenticate=lambda *_: None, workers=2)
    with pytest.raises(ConfigurationError, match="at least 1"):
        serve(settings.model_copy(update={"allow_unauthenticated": True}), workers=0)
