"""A real server (uvicorn in a thread), a real worker subprocess, and the official JS clients
(``js/``, installed with ``npm ci --prefix js``) run as Node processes against them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from dbos_agents.server import ServerSettings, create_app
from dbos_agents.server.auth import Authenticate
from dbos_agents.testing import CrashHarness, WorkerProcess
from tests.http.conftest import SECRET, LiveServer

if TYPE_CHECKING:
    from playwright.sync_api import Browser

REPO = Path(__file__).resolve().parents[2]
JS = REPO / "js"

Serve = Callable[..., LiveServer]


@pytest.fixture(scope="module")
def harness(
    fresh_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CrashHarness]:
    with CrashHarness(
        "tests.chat.app:runtime",
        fresh_database_url,
        cwd=REPO,
        log_dir=tmp_path_factory.mktemp("chat-logs"),
        executor_id="chat-tests-worker",
    ) as h:
        yield h


@pytest.fixture(scope="module")
def worker(harness: CrashHarness) -> Iterator[WorkerProcess]:
    w = harness.start_worker()
    yield w
    w.stop()


@pytest.fixture(scope="module")
def serve(harness: CrashHarness) -> Iterator[Serve]:
    """``serve(authenticate=None, **settings) -> LiveServer``: a server on the module's
    database (default: anonymous callers, session tokens signed with ``SECRET``)."""
    started: list[LiveServer] = []

    def make(authenticate: Authenticate | None = None, **overrides: Any) -> LiveServer:
        values: dict[str, Any] = {
            "database_url": harness.database_url,
            "allow_unauthenticated": authenticate is None,
            "secret": SECRET,
        }
        values.update(overrides)
        app = create_app(ServerSettings(**values), authenticate=authenticate)
        server = LiveServer(app).start()
        started.append(server)
        return server

    yield make
    for s in started:
        s.stop()


@pytest.fixture(scope="session")
def node() -> Callable[..., list[dict[str, Any]]]:
    """``node(script, *args, env=None, timeout=60)``: run ``js/<script>`` with Node; every
    stdout line is a JSON object (what the script reports), returned in order. A non-zero
    exit fails the test with the script's stderr."""
    exe = shutil.which("node")
    if exe is None:
        pytest.fail("Node is not installed (the chat-UI tests run the official JS clients)")
    if not (JS / "node_modules").is_dir():
        pytest.fail("the JS clients are not installed: run `npm ci --prefix js`")

    def run(
        script: str, *args: str, env: dict[str, str] | None = None, timeout: float = 60
    ) -> list[dict[str, Any]]:
        proc = subprocess.run(
            [exe, str(JS / script), *args],
            cwd=JS,
            env={**os.environ, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if proc.returncode != 0:
            pytest.fail(f"node {script} exited {proc.returncode}:\n{proc.stderr[-4000:]}")
        lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
        # What the client reported, for `pytest -s` (one line per scenario).
        print(f"node {script} {' '.join(args)}: {json.dumps(lines[-1]) if lines else '-'}"[:400])
        return lines

    return run


CHROMIUM = Path("/usr/bin/chromium")
"""Debian's Chromium (``.ci/setup-browser``): the chat page's tests drive it with playwright."""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Chromium per module (each test opens a context of its own)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield b
        b.close()
