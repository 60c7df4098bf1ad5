"""Futures keyed by name, resolved from any thread: how one thread (a LISTEN connection, a
workflow on the worker's loop) wakes coroutines waiting on other event loops."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Generic, TypeVar

T = TypeVar("T")
_Entry = tuple[asyncio.AbstractEventLoop, "asyncio.Future[T]"]


class Waiters(Generic[T]):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_key: dict[str, list[tuple[asyncio.AbstractEventLoop, asyncio.Future[T]]]] = {}

    def waiter(self, key: str) -> asyncio.Future[T]:
        """A future on the running loop that ``resolve(key, ...)`` sets; ``discard`` it
        when done with it."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T] = loop.create_future()
        with self._lock:
            self._by_key.setdefault(key, []).append((loop, fut))
        return fut

    def discard(self, key: str, fut: asyncio.Future[T]) -> None:
        with self._lock:
            waiting = self._by_key.get(key)
            if waiting is None:
                return
            waiting[:] = [(lp, f) for lp, f in waiting if f is not fut]
            if not waiting:
                del self._by_key[key]

    def __contains__(self, key: str) -> bool:
        with self._lock:
            return key in self._by_key

    def resolve(self, key: str, value: T) -> None:
        """Any thread: set ``value`` on every waiter of ``key`` (and forget them)."""
        with self._lock:
            waiting = self._by_key.pop(key, [])
        _set_all(waiting, value)

    def resolve_all(self, value: T) -> None:
        with self._lock:
            waiting = [w for ws in self._by_key.values() for w in ws]
            self._by_key.clear()
        _set_all(waiting, value)


def _set_all(waiting: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[T]]], value: T) -> None:
    for loop, fut in waiting:
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is left to wake
            loop.call_soon_threadsafe(_set, fut, value)


def _set(fut: asyncio.Future[T], value: T) -> None:
    if not fut.done():
        fut.set_result(value)
