"""Waiting, in a test, for something another process or task makes true."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


async def until(pred: Callable[[], Any], what: str, within: float = 30) -> Any:
    """``pred()``'s first truthy value (called off the loop, every 50 ms), else
    ``TimeoutError(what)`` after ``within`` seconds."""
    for _ in range(int(within / 0.05)):
        value = await asyncio.to_thread(pred)
        if value:
            return value
        await asyncio.sleep(0.05)
    raise TimeoutError(what)
