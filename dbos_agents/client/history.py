"""``AgentClient``'s reads of a session's past and its forks: ``history`` (whole, or as it
was after a turn), ``usage`` (who answered each turn, and what it cost) and ``fork`` (a
base class of ``AgentClient``, like ``LiveReads``).

Turn n is the session's n-th assistant message, across runs; what "as it was after turn n"
holds and what a fork copies is defined once, in ``store/fork.py``. A fork is authorized
like ``send``: a scoped client forks only its own sessions, and the fork keeps the
source's user and tenant.
"""

from __future__ import annotations

import sqlalchemy as sa
from dbos import DBOSClient

from .. import storable
from ..errors import InvalidRequestError
from ..outcome import SessionInfo
from ..records import HistoryEntry, TurnUsage
from ..settings import Settings
from ..store import fork as forks
from ..store import transcript
from ..store.unavailable import translated


def _turn(at_turn: object) -> int:
    """A turn number; one below 1 is a turn no session has (``TurnNotFoundError``)."""
    if isinstance(at_turn, bool) or not isinstance(at_turn, int):
        raise InvalidRequestError(f"at_turn must be an integer, got {type(at_turn).__name__}")
    return at_turn


class HistoryReads:
    """See the module doc; ``AgentClient`` provides the attributes declared here."""

    engine: sa.Engine
    settings: Settings
    database_url: str
    dbos: DBOSClient

    def _own(self, session_id: str) -> SessionInfo:
        raise NotImplementedError

    @translated
    def history(self, session_id: str, *, at_turn: int | None = None) -> list[HistoryEntry]:
        """The session's transcript; with ``at_turn``, as it was after that turn: the
        messages up to its assistant message and the tool results of its calls the
        transcript holds (``TurnNotFoundError`` for a turn the session does not have)."""
        self._own(session_id)
        if at_turn is None:
            return transcript.history(self.engine, session_id)
        return forks.history_at(self.engine, session_id, _turn(at_turn))

    @translated
    def usage(self, session_id: str) -> list[TurnUsage]:
        """One ``TurnUsage`` per model turn the session recorded, in order: the model that
        answered (its name and provider), tokens and cost. The session's own turns only: a
        sub-agent's turns are under its own session id (read them with that id); a fork's
        copied turns read as the source recorded them."""
        self._own(session_id)
        return transcript.turn_usage(self.engine, session_id)

    @translated
    def fork(self, session_id: str, *, at_turn: int, message: str) -> str:
        """A new session holding the root of ``session_id`` as it was after its turn
        ``at_turn`` (transcript, tool-call ledger, usage, state versions, copied as
        recorded), continued with ``message`` as a new run; returns its id. Nothing before
        the fork point runs again (no model call, no tool call); the original is untouched.
        A sub-agent's session forks its root, at the root's turn. ``TurnNotFoundError`` or
        ``AccessDeniedError``: nothing is created."""
        self._own(session_id)
        turn = _turn(at_turn)
        storable.check_text(message, "message")
        return forks.fork(
            self.engine,
            self.dbos,
            self.settings.queue_name,
            session_id=session_id,
            turn=turn,
            message=message,
        ).spec["session_id"]
