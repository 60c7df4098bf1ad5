"""``ToolContext``: what a tool handler knows about the call it serves, and, in a durable
tool (``@tool(durable=True)``), what it can do: inner steps, a snapshot, progress notes and
questions to a human or a browser.

The durable half is a protocol (``DurableOps``) the loop implements, so the definitions
import no workflow machinery.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol, TypeVar, overload

from pydantic import BaseModel

from .client_tools import ClientTool
from .messages import JSONValue
from .state import StateChanges

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class StepInfo:
    """The inner step running now (``ctx.current_step``): forward ``idempotency_key`` to
    the provider, so a request the step repeats is deduplicated there too."""

    name: str
    seq: int
    idempotency_key: str


@dataclass(frozen=True)
class Decision:
    """A human's answer to ``ctx.ask(APPROVAL, ...)``."""

    approved: bool
    reason: str | None = None
    decided_by: str | None = None


class _ApprovalAsk:
    """The marker ``ctx.ask`` takes to ask a human to approve (see ``APPROVAL``)."""

    def __repr__(self) -> str:
        return "APPROVAL"


APPROVAL = _ApprovalAsk()
"""Pass to ``ctx.ask`` to wait for an approval (an approver's decision, as for
``requires_approval`` tools) instead of a client tool's result."""


@dataclass(frozen=True)
class FormAsk:
    """A question whose answer is checked against a JSON schema rather than a client
    tool's output model (an MCP server's question): ``ctx.ask``'s machinery answers it with
    the submitted ``Delivery`` itself (a result or an error), for the asker to read."""

    name: str
    schema: dict[str, JSONValue]
    arguments: dict[str, JSONValue]


class DurableOps(Protocol):
    """What a durable tool's context delegates to (implemented by the loop)."""

    async def step(
        self,
        name: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        safe_to_retry: bool,
    ) -> Any: ...

    def checkpoint(self, data: JSONValue) -> Awaitable[None]: ...

    @property
    def snapshot(self) -> JSONValue | None: ...

    @property
    def recovered(self) -> bool: ...

    def current_step(self) -> StepInfo | None: ...

    def progress(self, note: str, fraction: float | None) -> Awaitable[None]: ...

    async def ask(
        self, target: ClientTool | _ApprovalAsk | FormAsk, input: Any, within: timedelta | None
    ) -> Any: ...


@dataclass
class ToolContext:
    """What a tool handler knows about the call it serves.

    ``idempotency_key`` is stable for (session, tool call) across crashes and replays:
    forward it to payment, email and other providers so a retried request is deduplicated.

    ``state`` is the session's typed state (``Agent(state=Model)``; None without one) as of
    the call's dispatch plus this call's own changes. Change it with ``ctx.state = new``
    or ``await ctx.update_state(fn)``: the change commits with the call's result, or not at
    all (see ``dbos_agents.state``). Changing the model in place is not recorded.

    A durable tool's body also has ``step``, ``checkpoint``/``snapshot``, ``progress`` and
    ``ask`` (elsewhere they raise ``TypeError``).
    """

    session_id: str
    root_session_id: str
    tool_call_id: str
    tool_name: str
    idempotency_key: str
    user_id: str | None = None
    tenant_id: str | None = None
    attempt: int = 1
    """1 on the first dispatch; higher only when ``verify`` said an earlier attempt did nothing."""
    changes: StateChanges | None = field(default=None, repr=False, compare=False)
    """The runtime's record of this call's state changes (None: the agent has no state)."""
    durable: DurableOps | None = field(default=None, repr=False, compare=False)
    """The runtime's side of a durable tool (None: not a durable tool)."""
    forwarded_props: JSONValue | None = None
    """What the chat page forwarded with the run (AG-UI ``forwardedProps``), carried in
    the run's input, so every execution and a sub-agent's tools see it; None: nothing."""

    def __setattr__(self, name: str, value: object) -> None:
        # Every field is fixed once built; only ``state`` may be assigned (a change).
        if name != "state" and name in self.__dict__:
            raise AttributeError(f"ToolContext.{name} cannot be changed")
        super().__setattr__(name, value)

    @property
    def state(self) -> Any:
        """The session's state (the agent's state model), or None for an agent without."""
        return None if self.changes is None else self.changes.current

    @state.setter
    def state(self, value: object) -> None:
        """A full replacement, validated now (``StateValidationError``: a tool error)."""
        self._changes("ctx.state = ...").replace(value)

    async def update_state(self, fn: Callable[[Any], Any]) -> Any:
        """Change the state with ``fn(old) -> new``; returns the new state. ``fn`` runs
        now on this call's view, and again at the commit on the latest committed state
        under the session's lock, so side-by-side tools do not lose each other's updates:
        keep it a pure function of its argument."""
        return self._changes("update_state").update(fn)

    def _changes(self, what: str) -> StateChanges:
        if self.changes is None:
            raise TypeError(f"{what}: agent has no state (declare Agent(..., state=Model))")
        return self.changes

    # --- durable tools -------------------------------------------------------------------

    def _ops(self, what: str) -> DurableOps:
        if self.durable is None:
            raise TypeError(f"ctx.{what} is only available in a durable tool (@tool(durable=True))")
        return self.durable

    @overload
    async def step(
        self,
        name: str,
        fn: Callable[..., Awaitable[T]],
        *args: object,
        safe_to_retry: bool = False,
        **kwargs: object,
    ) -> T: ...

    @overload
    async def step(
        self,
        name: str,
        fn: Callable[..., T],
        *args: object,
        safe_to_retry: bool = False,
        **kwargs: object,
    ) -> T: ...

    async def step(
        self,
        name: str,
        fn: Callable[..., object],
        *args: object,
        safe_to_retry: bool = False,
        **kwargs: object,
    ) -> object:
        """Run ``fn(*args, **kwargs)`` as an inner step: once, its output recorded (JSON,
        or the type ``fn``'s return annotation names); a re-executed body gets the recorded
        output without running it. Side-effecting unless ``safe_to_retry``: one that an
        earlier execution started but did not record is not run again
        (``StepOutcomeUnknownError``). An exception becomes ``StepFailedError``."""
        result: object = await self._ops("step").step(name, fn, args, kwargs, safe_to_retry)
        return result

    @property
    def current_step(self) -> StepInfo | None:
        """The inner step whose function is running (None outside one)."""
        return self._ops("current_step").current_step()

    def checkpoint(self, data: JSONValue) -> Awaitable[None]:
        """Replace the tool's snapshot with ``data`` (JSON; ``NotJSONError`` names the
        path). The write starts now and the next step waits for it; ``await`` it to know
        it is durable."""
        return self._ops("checkpoint").checkpoint(data)

    @property
    def snapshot(self) -> JSONValue | None:
        """The last checkpoint: an earlier execution's after a recovery (None: none yet)."""
        return self._ops("snapshot").snapshot

    @property
    def recovered(self) -> bool:
        """True when this execution of the body is not the first (a crash, a deploy)."""
        return self._ops("recovered").recovered

    def progress(self, note: str, fraction: float | None = None) -> Awaitable[None]:
        """Tell the session's readers how the tool is doing (``event: progress``), at most
        once per note however often the body runs; ``fraction`` is 0..1 if known."""
        return self._ops("progress").progress(note, fraction)

    @overload
    async def ask(
        self, target: _ApprovalAsk, input: JSONValue, *, within: timedelta | None = None
    ) -> Decision: ...

    @overload
    async def ask(
        self, target: ClientTool, input: JSONValue, *, within: timedelta | None = None
    ) -> BaseModel: ...

    async def ask(
        self,
        target: ClientTool | _ApprovalAsk,
        input: JSONValue,
        *,
        within: timedelta | None = None,
    ) -> Decision | BaseModel:
        """Wait durably for a browser's or a human's answer in the middle of the tool: a
        client tool's result (its output model) or, with ``APPROVAL``, a ``Decision``. The
        wait is the root session's like any other (``pending``, the inbox, a deadline:
        ``within``, else the client tool's or the agent's); ``AskTimeoutError`` when it
        passes."""
        answer: Decision | BaseModel = await self._ops("ask").ask(target, input, within)
        return answer


__all__ = ["APPROVAL", "Decision", "DurableOps", "FormAsk", "StepInfo", "ToolContext"]
