"""One object per event loop, for the model adapters' SDK clients: a client's pooled
connections belong to the loop that opened them and cannot move to another."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class PerLoop(Generic[T]):
    """``make()``'s object for each running loop. ``first`` (one made at definition time,
    to check the configuration there) goes to the first loop that asks, so the common case
    of one loop builds one object, not two."""

    def __init__(self, make: Callable[[], T], first: T | None = None) -> None:
        self._make = make
        self._unclaimed = first
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, T] = (
            weakref.WeakKeyDictionary()
        )

    def get(self) -> T:
        """The running loop's object, made on its first use."""
        loop = asyncio.get_running_loop()
        found = self._by_loop.get(loop)
        if found is None:
            found, self._unclaimed = self._unclaimed, None
            if found is None:
                found = self._make()
            self._by_loop[loop] = found
        return found

    def pop(self) -> T | None:
        """Forget the running loop's object and return it (for its owner to close)."""
        return self._by_loop.pop(asyncio.get_running_loop(), None)
