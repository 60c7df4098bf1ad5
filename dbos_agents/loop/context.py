"""What the session workflow needs at run time, published by the worker that launched it.

DBOS registers workflows by name at import, once per process, so the one launched
``AgentRuntime`` of the process publishes its agents, model, settings, ledger and its
``Receiver`` here. The workflow looks its agent up once per execution and passes the
``Agent`` (and each call's ``Tool``) down from there.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Protocol, cast

from dbos import DBOS

from ..agent import Agent
from ..errors import RuntimeNotLaunchedError, UnknownAgentError
from ..live.listen import Listener
from ..models.base import Model, StreamingModel
from ..outcome import RunSpec
from ..settings import Settings
from .ledger import Ledger


class Receiver(Protocol):
    """How the workflow waits for a message (``DBOS.recv``): the worker's may park a long
    wait (``worker.parking``)."""

    def enter_workflow(self) -> None:
        """Called as a session workflow's execution begins, in its own task."""
        ...

    async def recv(
        self, spec: RunSpec, topic: str, timeout_seconds: float, deadline: float | None
    ) -> object:
        """``DBOS.recv_async(topic, timeout_seconds)``; ``deadline`` (epoch seconds) is
        when it times out, ``None``: the end DBOS recorded for it."""
        ...


class InMemory:
    """A ``Receiver`` that never parks: every wait stays in memory."""

    def enter_workflow(self) -> None:
        pass

    async def recv(
        self, spec: RunSpec, topic: str, timeout_seconds: float, deadline: float | None
    ) -> object:
        return await DBOS.recv_async(topic, timeout_seconds=timeout_seconds)


class RunEnds:
    """Where a workflow hears that a run ended (an interrupt): the worker's LISTEN on run
    ends, set once it listens (None before, and in a process without one)."""

    listener: Listener | None = None


@dataclass(frozen=True)
class LoopContext:
    agents: dict[str, Agent]
    model: Model | None
    """The runtime's model: every agent's without one of its own (then never None)."""
    settings: Settings
    ledger: Ledger
    receiver: Receiver = field(default_factory=InMemory)
    run_ends: RunEnds = field(default_factory=RunEnds)

    @functools.cached_property
    def _streams(self) -> dict[int, bool]:
        """Per model object, whether it streams: decided once (a protocol ``isinstance``
        walks the protocol's members each call)."""
        return {}

    def model_for(self, agent: str) -> Model:
        """The agent's own model, else the runtime's."""
        own = self.agents[agent].model if agent in self.agents else None
        model = own if own is not None else self.model
        if model is None:  # AgentRuntime refuses this; a model for every agent
            raise UnknownAgentError(agent, list(self.agents))
        return model

    def streaming_model(self, agent: str) -> StreamingModel | None:
        """The agent's model, when its replies stream (it can, and the setting allows
        it); else None."""
        if not self.settings.stream_replies:
            return None
        model = self.model_for(agent)
        can = self._streams.get(id(model))
        if can is None:
            can = self._streams[id(model)] = isinstance(model, StreamingModel)
        return cast(StreamingModel, model) if can else None

    def agent(self, name: str) -> Agent:
        try:
            return self.agents[name]
        except KeyError:
            raise UnknownAgentError(name, list(self.agents)) from None


_current: LoopContext | None = None


def set_context(ctx: LoopContext | None) -> None:
    global _current
    _current = ctx


def get_context() -> LoopContext:
    if _current is None:
        raise RuntimeNotLaunchedError("no AgentRuntime has been launched in this process")
    return _current
