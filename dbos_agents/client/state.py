"""``client.state(session_id)``: a session's typed state, read by app code and UIs (a base
class of ``AgentClient`` and ``AsyncAgentClient``, kept apart so each module stays one idea).

A client does not load the worker's agents, so it does not know the state's model: it
returns the stored JSON, or, given ``model=``, the JSON validated into it. A stored state
the model no longer accepts raises ``StateValidationError`` naming the session and the
field (the worker upgrades old states with the agent's ``migrate_state``; a reader that
has one too passes it as ``migrate``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar, overload

import anyio.to_thread
import sqlalchemy as sa
from pydantic import BaseModel

from .. import state as typed
from .. import storable
from ..messages import JSONValue
from ..outcome import SessionInfo
from ..state import MigrateState
from ..store import state as state_rows
from ..store.unavailable import translated

if TYPE_CHECKING:
    from .sync import AgentClient

M = TypeVar("M", bound=BaseModel)


class StateReads:
    """See the module doc; ``AgentClient`` provides the attributes declared here."""

    engine: sa.Engine
    database_url: str

    def _own(self, session_id: str) -> SessionInfo:
        raise NotImplementedError

    @overload
    def state(self, session_id: str, *, at_turn: int | None = None) -> JSONValue | None: ...

    @overload
    def state(
        self,
        session_id: str,
        model: type[M],
        *,
        migrate: MigrateState | None = None,
        at_turn: int | None = None,
    ) -> M: ...

    def state(
        self,
        session_id: str,
        model: type[BaseModel] | None = None,
        *,
        migrate: MigrateState | None = None,
        at_turn: int | None = None,
    ) -> Any:
        """The session's latest committed state (with ``at_turn``: as committed by the
        calls of turns up to that one): its JSON (None: no tool changed it yet), or with
        ``model`` that JSON validated (``model()`` when never changed). Same authorization
        as ``session``; raises ``SessionNotFoundError``, ``AccessDeniedError``,
        ``StateValidationError``."""
        return self._read_state(session_id, model, migrate, at_turn)

    @translated
    def _read_state(
        self,
        session_id: str,
        model: type[BaseModel] | None,
        migrate: MigrateState | None,
        at_turn: int | None,
    ) -> Any:
        self._own(session_id)
        if at_turn is not None:
            storable.check_int(at_turn, "at_turn", 0, 2**31 - 1)
        row = state_rows.read(self.engine, session_id, at_turn=at_turn)
        raw = None if row is None else row.state
        if model is None:
            return raw
        return typed.validate(model, session_id, raw, migrate)

    @translated
    def state_version(
        self, session_id: str, *, at_turn: int | None = None
    ) -> state_rows.StateVersion | None:
        """The latest committed version (``at_turn`` as in ``state``) with what committed
        it (version number, run, turn, tool call); None when no tool changed the state."""
        self._own(session_id)
        if at_turn is not None:
            storable.check_int(at_turn, "at_turn", 0, 2**31 - 1)
        return state_rows.read(self.engine, session_id, at_turn=at_turn)


class AsyncStateReads:
    """``state`` for ``AsyncAgentClient``: the sync read, in a worker thread."""

    _sync: AgentClient

    @overload
    async def state(self, session_id: str, *, at_turn: int | None = None) -> JSONValue | None: ...

    @overload
    async def state(
        self,
        session_id: str,
        model: type[M],
        *,
        migrate: MigrateState | None = None,
        at_turn: int | None = None,
    ) -> M: ...

    async def state(
        self,
        session_id: str,
        model: type[BaseModel] | None = None,
        *,
        migrate: MigrateState | None = None,
        at_turn: int | None = None,
    ) -> Any:
        """``AgentClient.state``, awaited."""
        sync = self._sync

        def read() -> Any:
            return sync._read_state(session_id, model, migrate, at_turn)

        return await anyio.to_thread.run_sync(read)

    async def state_version(
        self, session_id: str, *, at_turn: int | None = None
    ) -> state_rows.StateVersion | None:
        """``AgentClient.state_version``, awaited."""
        sync = self._sync
        return await anyio.to_thread.run_sync(
            lambda: sync.state_version(session_id, at_turn=at_turn)
        )
