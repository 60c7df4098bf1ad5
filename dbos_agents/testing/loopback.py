"""The fake model servers' two ways of running: an ASGI app served on 127.0.0.1 by uvicorn
in a background thread of the test process, or a process of their own (their ``python -m``
mode), for tests that kill and restart workers while the server keeps its state."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn


@contextmanager
def serve_in_thread(app: Any, name: str, port: int = 0) -> Iterator[int]:
    """Serve ``app`` on ``port`` (0: a free one) until the block ends; yields the port.
    ``RuntimeError`` when it does not start within 10 s."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    bound: int = sock.getsockname()[1]
    config = uvicorn.Config(
        app, log_config=None, access_log=False, lifespan="off", timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=name, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            sock.close()
            raise RuntimeError(f"the {name} server did not start")
        time.sleep(0.01)
    try:
        yield bound
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@contextmanager
def serve_in_process(module: str, *args: str) -> Iterator[str]:
    """Run ``python -m module *args`` until the block ends; yields the base URL the server
    prints as its first line. ``RuntimeError`` when that line is not a loopback URL."""
    proc = subprocess.Popen([sys.executable, "-m", module, *args], stdout=subprocess.PIPE)
    try:
        line = proc.stdout.readline().decode().strip() if proc.stdout is not None else ""
        if not line.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"{module} did not print its URL (got {line!r})")
        yield line
    finally:
        proc.terminate()
        proc.wait(10)
