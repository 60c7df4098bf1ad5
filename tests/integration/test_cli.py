"""The README's first command, and the worker/migrate commands, as a user runs them."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from dbos_agents.store.embedded import stop_embedded_database
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


DEAD_URL = "postgresql://postgres@127.0.0.1:1/nowhere"


def test_migrate_against_a_dead_host_fails_fast_with_the_host() -> None:
    r = _cli("migrate", "--database-url", DEAD_URL, timeout=60)
    assert r.returncode == 9, r.stderr
    assert "DATABASE_UNAVAILABLE" in r.stderr and "127.0.0.1:1/nowhere" in r.stderr


def test_worker_with_a_bad_app_spec_exits_with_a_clear_error() -> None:
    r = _cli("worker", "--app", "no_such_module:runtime")
    assert r.returncode == 2
    assert "cannot load 'no_such_module:runtime'" in r.stderr


def test_serve_refuses_to_start_without_authentication(fresh_database_url: str) -> None:
    r = _cli("serve", "--database-url", fresh_database_url, timeout=60)
    assert r.returncode == 2
    assert "INVALID_CONFIGURATION" in r.stderr and "--allow-unauthenticated" in r.stderr


def test_errors_are_one_line_with_a_code_and_an_exit_status() -> None:
    r = _cli("sessions", "--database-url", DEAD_URL)
    assert r.returncode == 9
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("error [DATABASE_UNAVAILABLE]") and "127.0.0.1:1" in line
    j = _cli("show", "ses_x", "--database-url", DEAD_URL, "--json")
    assert j.returncode == 9
    body = json.loads(j.stdout)
    assert body["error"] == "DATABASE_UNAVAILABLE" and body["exit_code"] == 9
    usage = _cli("sessions", "--limit", "0", "--json")
    assert usage.returncode == 2 and json.loads(usage.stdout)["error"] == "INVALID_USAGE"
    # --debug adds the traceback and keeps the exit status.
    d = _cli("--debug", "sessions", "--database-url", DEAD_URL)
    assert d.returncode == 9 and "Traceback" in d.stderr and "Traceback" not in r.stderr


# --- the embedded default ----------------------------------------------------------------


def _env(data_dir: Path, **extra: str) -> dict[str, str]:
    """No database configured: the CLI uses the embedded Postgres under ``data_dir``; the
    ``dbos-agents`` of this venv comes first on PATH, as after ``pip install``."""
    unset = ("DBOS_AGENTS_DATABASE_URL", "DBOS_AGENTS_SERVER_DATABASE_URL", "DBOS_AGENTS_CONFIG")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env["DBOS_AGENTS_DATA_DIR"] = str(data_dir)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return {**env, **extra}


def _run(
    argv: list[str], env: dict[str, str], cwd: Path, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    exe = shutil.which(argv[0], path=env["PATH"])
    assert exe is not None, f"{argv[0]} is not on PATH"
    return subprocess.run(
        [exe, *argv[1:]], capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd
    )


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    data = tmp_path / "data"
    yield data
    stop_embedded_database(data / "pgdata")  # it outlives the processes that use it


def test_without_a_database_the_first_command_creates_it_and_says_so(
    data_dir: Path, tmp_path: Path
) -> None:
    """No `dbos-agents migrate` first (issue 29): any command creates and migrates the
    embedded database, in one line that also says how to stop the Postgres it leaves."""
    r = _run(["dbos-agents", "show", "ses_x"], _env(data_dir), tmp_path, timeout=120)
    assert r.returncode == 8, r.stderr
    created, error = r.stderr.strip().splitlines()
    assert created.startswith("created the embedded Postgres in data/pgdata/ (first use)")
    assert "`dbos-agents db stop` stops it" in created
    assert error.startswith("error [SESSION_NOT_FOUND]")
    assert (data_dir / "pgdata" / "PG_VERSION").exists()


def _next_steps(stdout: str) -> list[list[str]]:
    """The commands under the demo's "Next steps" heading, comments dropped."""
    lines = stdout.split("Next steps", 1)[1].splitlines()[1:]
    steps = []
    for line in lines:
        if not line.startswith("  "):
            break
        steps.append(shlex.split(line.split("  # ", 1)[0]))
    return steps


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def _wait_until_up(argv: list[str], proc: subprocess.Popen[str], log: Path, port: int) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"{argv} exited {proc.returncode}: {log.read_text()[-2000:]}"
        if argv[1] == "worker" and "dbos-agents worker ready" in log.read_text():
            return
        if argv[1] == "serve":
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
        time.sleep(0.2)
    raise TimeoutError(f"{argv} not up: {log.read_text()[-2000:]}")


def test_demo_next_steps_run_as_printed(data_dir: Path, tmp_path: Path) -> None:
    """`dbos-agents demo` on the embedded default, then every next step it prints, as
    printed: the worker and the server are started, seen up, and stopped with SIGTERM."""
    port = _free_port()
    env = _env(data_dir, DBOS_AGENTS_SERVER_PORT=str(port))  # port 8000 may be taken here
    demo = _run(["dbos-agents", "demo"], env, tmp_path, timeout=300)
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert "refunds at the provider: 1" in demo.stdout
    steps = _next_steps(demo.stdout)
    assert {s[1] for s in steps if s[0] == "dbos-agents"} >= {
        "sessions",
        "show",
        "follow",
        "worker",
        "start",
        "pending",
        "serve",
    }
    servers = [s for s in steps if s[0] == "dbos-agents" and s[1] in ("worker", "serve")]
    started: list[tuple[list[str], subprocess.Popen[str]]] = []
    try:
        for argv in servers:
            log = tmp_path / f"{argv[1]}.log"
            with log.open("w") as f:
                proc = subprocess.Popen(
                    [shutil.which(argv[0], path=env["PATH"]) or argv[0], *argv[1:]],
                    stdout=f,
                    stderr=subprocess.STDOUT,
                    text=True,
                    env=env,
                    cwd=tmp_path,
                )
            started.append((argv, proc))
            _wait_until_up(argv, proc, log, port)
        for argv in steps:
            if argv in servers or (argv[0] == "psql" and shutil.which("psql") is None):
                continue
            r = _run(argv, env, tmp_path)
            assert r.returncode == 0, f"{shlex.join(argv)} -> {r.returncode}: {r.stderr[-2000:]}"
            if argv[1:2] == ["show"]:
                assert "I refunded $249.00" in r.stdout
    finally:
        for _, proc in started:
            proc.send_signal(signal.SIGTERM)
        codes = [proc.wait(timeout=60) for _, proc in started]
    assert codes == [0] * len(servers)


# --- serve --workers ----------------------------------------------------------------------

SERVE_HOOKS = """\
import os
from pathlib import Path

from dbos_agents.server import Principal


def authenticate(request, operation, session_id):
    with open(Path(__file__).with_name("pids"), "a") as f:
        f.write(f"{os.getpid()}\\n")
    user = request.headers.get("x-user")
    return Principal(subject=user, user_id=user) if user else None
"""


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


def test_workers_share_the_port_and_the_hook_and_stop_on_one_sigterm(
    fresh_database_url: str, tmp_path: Path
) -> None:
    migrate = _cli("migrate", "--database-url", fresh_database_url)
    assert migrate.returncode == 0, migrate.stderr
    (tmp_path / "myhooks.py").write_text(SERVE_HOOKS)
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["DBOS_AGENTS_SERVER_WORKERS"] = "2"  # as --workers 2
    argv = [sys.executable, "-m", "dbos_agents.cli", "serve"]
    argv += ["--auth", "myhooks:authenticate", "--port", str(port)]
    argv += ["--database-url", fresh_database_url]
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=out, stderr=out, text=True)
    try:
        _wait_until_up(argv[2:], proc, log, port)
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
    with pytest.raises(ValueError, match="workers"):
        ServerSettings(workers=0)
