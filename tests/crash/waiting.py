"""Polling for the crash tests (real worker processes: conditions are reached, not awaited)."""

from __future__ import annotations

import time
from collections.abc import Callable


def until(pred: Callable[[], object], timeout: float = 60.0) -> float:
    """Poll ``pred`` every 50 ms; the monotonic time at which it first held, or
    ``TimeoutError`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return time.monotonic()
        time.sleep(0.05)
    raise TimeoutError("condition not met")
