"""The worker's live context: what the registered workflow and steps need at run time.

DBOS registers workflows by name at import, once per process, so the one launched
``AgentRuntime`` of the process publishes its agents, model and ledger here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..agent import Agent
from ..errors import RuntimeNotLaunchedError, UnknownAgentError
from ..models.base import Model
from ..settings import Settings
from .ledger import Ledger
from .parking import Parker


@dataclass(frozen=True)
class WorkerContext:
    agents: dict[str, Agent]
    model: Model
    settings: Settings
    ledger: Ledger
    parker: Parker = field(default_factory=lambda: Parker(None))
    """Parks long waits (``Settings.park_after_sec``); by default it never parks."""

    def agent(self, name: str) -> Agent:
        try:
            return self.agents[name]
        except KeyError:
            raise UnknownAgentError(name, list(self.agents)) from None


_current: WorkerContext | None = None


def set_context(ctx: WorkerContext | None) -> None:
    global _current
    _current = ctx


def get_context() -> WorkerContext:
    if _current is None:
        raise RuntimeNotLaunchedError("no AgentRuntime has been launched in this process")
    return _current
