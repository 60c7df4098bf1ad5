"""What every call kind shares: the turn its calls belong to, a planned call, a call's
result, and the kind's interface (``Kind``)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel

from ...agent import Agent
from ...messages import JSONValue, ToolCall
from ...outcome import RunSpec
from ...store.calls import CallKind
from ..ledger import CallResult as CallResult
from ..ledger import WaitSpec

SessionWorkflow = Callable[[RunSpec], Coroutine[Any, Any, dict[str, JSONValue]]]
"""The registered session workflow (a sub-agent runs it as a child workflow)."""


class RunInterrupted(Exception):
    """The run was interrupted (a wait was cancelled, or a call's run is fenced off): it
    stops as ``interrupted``."""


@dataclass(frozen=True)
class Turn:
    """What every call of one turn shares."""

    spec: RunSpec
    agent: Agent
    deadlines: dict[str, float]
    """The absolute deadline of each wait the model turn opened, by call id."""
    workflow: SessionWorkflow
    number: int = 0
    """The turn's number in the session (its assistant message's turn)."""
    spans: dict[str, Any] = field(default_factory=dict)
    """The started span of each call this execution runs, by call id (``loop.spans``)."""


class SubAgentTask(BaseModel):
    """A sub-agent call's arguments: the task, as the parent's model wrote it."""

    message: str


@dataclass(frozen=True)
class Planned:
    """A call that passed the pure checks: its kind and its arguments, validated once."""

    call: ToolCall
    args: BaseModel
    kind: Kind


class Kind(Protocol):
    name: ClassVar[CallKind]
    concurrent: ClassVar[bool]
    """Runs beside the other calls of the turn (it records no DBOS operation)."""
    dispatched_on_open: ClassVar[bool]
    """Marked ``dispatched`` when the turn's waits open (it may act outside the worker)."""

    def wait(self, agent: Agent, p: Planned) -> WaitSpec | None:
        """The pending row to open for this call, if it waits for someone."""
        ...

    async def prepare(self, turn: Turn, p: Planned) -> object:
        """Called in call order before any call of the sequence runs."""
        ...

    async def run(self, turn: Turn, p: Planned, prepared: object) -> CallResult: ...
