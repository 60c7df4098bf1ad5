"""One LISTEN connection per process and channel, fanned out to the waiters of each payload.

A waiter is an asyncio future on its own loop, resolved when a ``NOTIFY`` on the channel
carries its key. Postgres delivers notifications only to a connected listener, so after
every (re)connect every waiter is resolved as well: "look again", since what it waits for
may have been announced while nobody listened. A waiter therefore reads the state it waits
for *after* registering, and again each time it is woken; a slow re-check on its own timer
is its last safety net, never a poll per caller.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Sequence

import psycopg

from ..waiters import Waiters

log = logging.getLogger("dbos_agents")


class Listener:
    """LISTEN on ``channel`` (or several) from a thread of its own (see the module doc).
    A notification wakes the waiters of ``key(channel, payload)``, by default the payload."""

    def __init__(
        self,
        database_url: str,
        channel: str | Sequence[str],
        *,
        connect_timeout_sec: float = 5.0,
        key: Callable[[str, str], str] | None = None,
        tap: Callable[[str, str], None] | None = None,
    ):
        self.database_url = database_url
        self.channels = (channel,) if isinstance(channel, str) else tuple(channel)
        self.channel = self.channels[0]
        self._key = key or (lambda _channel, payload: payload)
        self._tap = tap
        """Called (on the listener's thread) with every notification's key and payload, and
        with ``("", "")`` after each (re)connect: for one consumer that batches what it
        hears."""
        self.connect_timeout_sec = connect_timeout_sec
        self.connects = 0
        """Connections made (each one wakes every waiter)."""
        self._waiters: Waiters[None] = Waiters()
        self._stop = threading.Event()
        self.listening = threading.Event()
        """Set once the first connection listens."""
        self._thread = threading.Thread(
            target=self._run, name=f"dbos-agents-listen-{self.channel}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5.0)
        self._waiters.resolve_all(None)

    def waiter(self, key: str) -> asyncio.Future[None]:
        """A future resolved at the next notification for ``key`` (or a reconnect)."""
        return self._waiters.waiter(key)

    def discard(self, key: str, fut: asyncio.Future[None]) -> None:
        self._waiters.discard(key, fut)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with psycopg.connect(
                    self.database_url,
                    autocommit=True,
                    connect_timeout=max(1, round(self.connect_timeout_sec)),
                    application_name=f"dbos-agents-listen-{self.channel}",
                ) as conn:
                    for channel in self.channels:
                        conn.execute(f"LISTEN {channel}")
                    self.connects += 1
                    self.listening.set()
                    self._waiters.resolve_all(None)  # whatever was announced while nobody listened
                    if self._tap is not None:
                        self._tap("", "")
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=0.5):
                            key = self._key(note.channel, note.payload)
                            self._waiters.resolve(key, None)
                            if self._tap is not None:
                                self._tap(key, note.payload)
            except Exception as exc:  # database away: the waiters' own re-checks cover it
                log.debug("listener reconnecting", extra={"error": str(exc)})
                self._stop.wait(1.0)
