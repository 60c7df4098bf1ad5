"""``AgentClient``'s reads that are not a session's live log: a past run's outcome, the
agents the fleet serves, the operator inbox's lists (a base class of ``AgentClient``, like
``LiveReads``). The HTTP server reads through these and never through the store.

The inbox's lists take the tenant they show; a scoped client shows no other tenant's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from .. import storable
from ..errors import InvalidRequestError
from ..messages import JSONValue
from ..outcome import RunOutcome, SessionInfo
from ..page_contract import refusal
from ..records import PageInput
from ..settings import Settings
from ..store import inbox, runs, workers
from ..store.unavailable import translated
from ..store.workers import Fleet
from .scope import Scope

INBOX_MAX_ROWS = inbox.MAX_ROWS
"""An inbox list holds at most this many calls."""


@dataclass(frozen=True)
class InboxCall:
    """A pending (or recently settled) call as the operator inbox shows it."""

    root_session_id: str
    tool_call_id: str
    owner_session_id: str
    kind: str
    tool: str
    arguments: JSONValue
    output_schema: dict[str, JSONValue] | None
    status: str
    close_reason: str | None
    deadline: datetime
    created_at: datetime
    resolved_at: datetime | None
    submission: JSONValue
    tenant_id: str | None
    path: tuple[str, ...]
    """Agent names from the root session's agent down to the one that waits."""

    @property
    def agent(self) -> str:
        return self.path[0] if self.path else "?"

    @property
    def sub_agents(self) -> tuple[str, ...]:
        return self.path[1:]

    @property
    def decided_by(self) -> str | None:
        s = self.submission
        return str(s["decided_by"]) if isinstance(s, dict) and s.get("decided_by") else None


def _calls(rows: list[dict[str, Any]]) -> list[InboxCall]:
    return [InboxCall(**r) for r in rows]


class Lookups:
    """See the module doc; ``AgentClient`` provides the attributes declared here."""

    engine: sa.Engine
    settings: Settings
    database_url: str
    _scope: Scope | None

    def _own(self, session_id: str) -> SessionInfo:
        raise NotImplementedError

    @translated
    def run_outcome(self, session_id: str, run_seq: int) -> RunOutcome | None:
        """Run ``run_seq`` of the session's outcome; None while it has not ended."""
        storable.check_int(run_seq, "run_seq", 1)
        self._own(session_id)
        return runs.get(self.engine, session_id, run_seq)

    def _check_page(self, agent: str, page: PageInput | None) -> None:
        """Refuse a page's input the agent's workers would refuse (``page_contract.py``)."""
        if not page or ("tools" not in page and "state" not in page):
            return
        contract = workers.page_contract(self.engine, agent, self.settings.stale_after_sec)
        problem = None if contract is None else refusal(agent, contract, page)
        if problem is not None:
            raise problem

    @translated
    def served_agents(self) -> Fleet | None:
        """The agents workers serve now (a heartbeat within ``stale_after_sec``) and have
        served; None when this role may not read the workers' table."""
        return workers.known_agents(self.engine, self.settings.stale_after_sec)

    def _tenant(self, tenant_id: str | None) -> str | None:
        storable.check_optional_id(tenant_id, "tenant_id")
        mine = None if self._scope is None else self._scope.tenant_id
        if mine is not None and tenant_id not in (None, mine):
            raise InvalidRequestError(f"tenant {tenant_id!r} is outside this client's scope")
        return tenant_id or mine

    @translated
    def inbox_open(
        self, *, tenant_id: str | None = None, limit: int = INBOX_MAX_ROWS
    ) -> list[InboxCall]:
        """The open calls (waiting or submitted, their run not ended) of one tenant
        (``None``: every tenant), earliest deadline first."""
        storable.check_int(limit, "limit", 1, INBOX_MAX_ROWS)
        schema = self.settings.dbos_system_schema
        tenant = self._tenant(tenant_id)
        return _calls(inbox.list_open(self.engine, schema, tenant_id=tenant, limit=limit))

    @translated
    def inbox_settled(
        self, *, tenant_id: str | None = None, within_seconds: float = 3600.0, limit: int = 50
    ) -> list[InboxCall]:
        """Calls settled in the last ``within_seconds``, newest first (as ``inbox_open``)."""
        storable.check_int(limit, "limit", 1, INBOX_MAX_ROWS)
        tenant = self._tenant(tenant_id)
        rows = inbox.list_settled(
            self.engine, tenant_id=tenant, within_seconds=within_seconds, limit=limit
        )
        return _calls(rows)

    @translated
    def inbox_session_calls(self, root_session_id: str) -> list[InboxCall]:
        """Every call of one session tree, open or settled, oldest first."""
        self._own(root_session_id)
        return _calls(inbox.list_session_calls(self.engine, root_session_id))

    @translated
    def inbox_summary(self) -> tuple[int, float]:
        """How many calls are open (every tenant) and the oldest one's age in seconds."""
        return inbox.open_summary(self.engine, self.settings.dbos_system_schema)
