"""A database outage is reported twice: once when it starts, once when it ends.

While Postgres is away every thread that touches it fails: DBOS's queue threads, its
listener and scheduler, the heartbeat, the parker. Each used to log its failure, with a
traceback, every time it retried: over a thousand lines in six seconds, which hid the one
fact that mattered. Now such records are dropped and the outage is told in two lines.

Connection failures are recognised by their text (``is_connection_error``). The first one
only makes the outage *suspected*: a pooled connection that died long ago fails once and is
replaced, which is no outage. The worker's probe (``worker.identity``, every heartbeat
interval, on a connection of its own) decides: ``failed`` announces the outage (dated from
the first suspicion), ``answered`` announces its end with the number of records not shown,
or clears a suspicion that came to nothing.
"""

from __future__ import annotations

import logging
import threading
import time

log = logging.getLogger("dbos_agents")

OWN_EVENTS = frozenset({"database_unreachable", "database_answers"})
_PATTERNS = (
    "connection refused",
    "connection failed",
    "connection to server at",
    "server closed the connection",
    "connection is closed",
    "connection is lost",
    "connection was lost",
    "connection reset by peer",
    "terminating connection",
    "could not connect to server",
    "consuming input failed",
    "connection timeout expired",
    "the database system is",
    "ssl syscall error",
    "broken pipe",
    "no route to host",
    "network is unreachable",
    "could not translate host name",
    "server conn crashed",
    "is the server running",
)


def is_connection_error(text: str) -> bool:
    """Whether ``text`` (a message, an error, a traceback) says the database is away."""
    low = text.lower()
    return any(p in low for p in _PATTERNS)


def first_line(text: str) -> str:
    """The part of an error worth one line: its first line naming a connection failure."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    for ln in lines:
        if is_connection_error(ln):
            return ln[:300]
    return (lines[0] if lines else text)[:300]


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.down_since: float | None = None
        """Wall time the announced outage began; None: no outage announced."""
        self.suspect: tuple[float, str] | None = None
        self.hidden = 0


_state = _State()


def noticed(reason: str) -> None:
    """A connection failure seen in a log record (dropped by ``OutageFilter``)."""
    with _state.lock:
        _state.hidden += 1
        if _state.down_since is None and _state.suspect is None:
            _state.suspect = (time.time(), first_line(reason))


def failed(exc: BaseException | str) -> None:
    """The probe could not reach the database: announce the outage, once."""
    reason = first_line(str(exc)) or type(exc).__name__
    with _state.lock:
        if _state.down_since is not None:
            _state.hidden += 1
            return
        since, why = _state.suspect or (time.time(), reason)
        _state.down_since, _state.suspect = since, None
    log.warning(
        f"database unreachable: {why}; retrying, and not repeating connection errors until"
        " it answers again",
        extra={"event": "database_unreachable", "error": why},
    )


def answered() -> None:
    """The probe reached the database: announce the outage's end, or forget a suspicion."""
    with _state.lock:
        since, hidden = _state.down_since, _state.hidden
        _state.suspect, _state.hidden = None, 0
        if since is None:
            return
        _state.down_since = None
    took = time.time() - since
    log.warning(
        f"database answers again after {took:.1f}s ({hidden} connection errors not shown)",
        extra={"event": "database_answers", "outage_sec": round(took, 1), "hidden": hidden},
    )


def down() -> bool:
    """Whether an outage is announced and not over."""
    return _state.down_since is not None


def reset() -> None:
    """Forget everything (tests)."""
    with _state.lock:
        _state.down_since, _state.suspect, _state.hidden = None, None, 0


class OutageFilter(logging.Filter):
    """Drops records about connection failures (see the module doc): every level from
    DBOS, up to WARNING from dbos-agents (a run that failed, at ERROR, is always shown)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "event", None) in OWN_EVENTS:
            return True
        ours = record.name == "dbos_agents" or record.name.startswith("dbos_agents.")
        if ours and record.levelno >= logging.ERROR:
            return True
        text = _record_text(record)
        if not is_connection_error(text):
            return True
        noticed(text)
        return False


def _record_text(record: logging.LogRecord) -> str:
    parts = [record.getMessage(), str(getattr(record, "error", "") or "")]
    exc = record.exc_info[1] if record.exc_info else None
    for _ in range(8):  # the chain's first few links name the cause
        if exc is None:
            break
        parts.append(f"{type(exc).__name__}: {exc}")
        exc = exc.__cause__ or exc.__context__
    return "\n".join(parts)
