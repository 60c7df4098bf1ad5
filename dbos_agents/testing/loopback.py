"""An ASGI app served on 127.0.0.1 by uvicorn in a background thread: the fake model
servers' one way of running inside a test process."""

from __future__ import annotations

import socket
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
