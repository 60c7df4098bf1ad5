"""Connections on the async client's event loop for its hottest read, a live stream's full
read (``AsyncAgentClient.read_events``).

Every other async call runs the sync client in a thread. A server with hundreds of open
streams makes a full read at each message and each run's end of every one of them; in a
thread each read also paid the hop to and from the loop and the pool's ping. Here it is
psycopg's async connection on the loop that serves the streams: a few kept per loop, at
most ``LIMIT`` reads at once per loop (the others wait their turn), no ping: a kept
connection that fails (the server restarted under it) is dropped with the others kept,
and the read runs once more on a new one (it only reads).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

import psycopg

from ..store import pg
from ..store.db import libpq_url

T = TypeVar("T")

LIMIT = 8
"""Reads at once per event loop (and connections kept): the sync pool's size and a half."""


@dataclass
class _Loop:
    gate: asyncio.Semaphore
    idle: list[pg.Driver] = field(default_factory=list)


class LoopReads:
    """See the module doc; ``run`` is the one entry point."""

    def __init__(self, database_url: str, connect_timeout_sec: float) -> None:
        self._url = libpq_url(database_url)
        self._timeout = max(1, round(connect_timeout_sec))
        self._loops: dict[asyncio.AbstractEventLoop, _Loop] = {}
        self.connects = 0
        """Connections made (a figure for tests)."""

    async def run(self, read: Callable[[pg.Driver], Awaitable[T]]) -> T:
        """``read(connection)`` on a connection of this loop, in autocommit; it must leave
        no transaction open when it returns."""
        here = self._here()
        async with here.gate:
            conn = self._kept(here)
            while True:
                fresh = conn is None
                if conn is None:
                    conn = await psycopg.AsyncConnection.connect(
                        self._url, autocommit=True, connect_timeout=self._timeout
                    )
                    self.connects += 1
                try:
                    result = await read(conn)
                except psycopg.OperationalError:
                    _finish(conn)
                    if fresh:
                        raise
                    while here.idle:  # the server went away under the kept ones too
                        _finish(here.idle.pop())
                    conn = None
                    continue
                except BaseException:  # mid-protocol, perhaps in a transaction
                    _finish(conn)
                    raise
                self._keep(here, conn)
                return result

    @staticmethod
    def _kept(here: _Loop) -> pg.Driver | None:
        while here.idle:
            conn = here.idle.pop()
            if pg.usable(conn):
                return conn
            _finish(conn)
        return None

    def _here(self) -> _Loop:
        loop = asyncio.get_running_loop()
        here = self._loops.get(loop)
        if here is None:
            for gone in [lp for lp in self._loops if lp.is_closed()]:
                for conn in self._loops.pop(gone).idle:
                    _finish(conn)
            here = self._loops[loop] = _Loop(asyncio.Semaphore(LIMIT))
        return here

    def _keep(self, here: _Loop, conn: pg.Driver) -> None:
        if pg.usable(conn) and len(here.idle) < LIMIT:
            here.idle.append(conn)
        else:
            _finish(conn)

    async def aclose(self) -> None:
        """Close the connections kept on this loop."""
        here = self._loops.pop(asyncio.get_running_loop(), None)
        if here is not None:
            while here.idle:
                await _close(here.idle.pop())

    def close(self) -> None:
        """Close every kept connection, from any thread (the sync client's ``close``)."""
        loops, self._loops = self._loops, {}
        for here in loops.values():
            for conn in here.idle:
                _finish(conn)


async def _close(conn: pg.Driver) -> None:
    with contextlib.suppress(Exception):
        await conn.close()


def _finish(conn: pg.Driver) -> None:
    """Close without the loop (it may be another thread's, or closed): libpq's own close."""
    with contextlib.suppress(Exception):
        conn.pgconn.finish()
