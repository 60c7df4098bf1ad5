"""SIGTERM to ``dbos-agents serve`` (a real process) with an event stream open: the stream
ends properly (its last chunk sent: the client reads a complete body and can reconnect),
the server logs no "ASGI callable returned without completing response", and exits 0."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_sigterm_with_a_stream_open_ends_the_stream_cleanly(
    fresh_database_url: str, tmp_path: Path
) -> None:
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    argv = [sys.executable, "-m", "dbos_agents.cli", "serve", "--allow-unauthenticated"]
    argv += ["--port", str(port), "--database-url", fresh_database_url]
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, log.read_text()[-2000:]
            assert time.monotonic() < deadline, log.read_text()[-2000:]
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        started = httpx.post(f"{base}/sessions", json={"agent": "shop", "message": "hi"})
        sid = started.json()["session_id"]
        read: list[str] = []
        failure: list[BaseException] = []
        opened = threading.Event()

        def follow() -> None:
            try:
                with httpx.stream("GET", f"{base}/sessions/{sid}/events", timeout=30) as r:
                    opened.set()
                    read.extend(r.iter_text())
            except BaseException as exc:
                failure.append(exc)

        reader = threading.Thread(target=follow)
        reader.start()
        assert opened.wait(15)
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        reader.join(timeout=15)
        assert not reader.is_alive()
        assert failure == [], failure  # a cut body is RemoteProtocolError here
        assert "retry:" in "".join(read)
        assert "ASGI callable returned without completing response" not in log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
