"""Server tools: ``@tool`` turns a typed function into a tool with schemas and durability rules.

A tool is side-effecting unless declared ``safe_to_retry=True``: the runtime runs it at most
once per tool call, even across crashes. Input and output schemas come from the type hints
(pydantic), and every definition problem is reported at decoration time in one error.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Generic, overload

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError, create_model
from typing_extensions import ParamSpec, TypeVar

from .errors import DefinitionError
from .messages import JSONValue
from .state import StateChanges

NAME_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
RESERVED_PREFIXES = ("subagent__", "client__")

F = TypeVar("F", bound=Callable[..., object])
P = ParamSpec("P", default=...)
R = TypeVar("R", covariant=True, default=object)
"""A tool keeps its function's signature (``Tool[[str], Awaitable[Order]]``), so calling the
tool directly in a unit test is typed; a bare ``Tool`` accepts any tool."""


@dataclass
class ToolContext:
    """What a tool handler knows about the call it serves.

    ``idempotency_key`` is stable for (session, tool call) across crashes and replays:
    forward it to payment, email and other providers so a retried request is deduplicated.

    ``state`` is the session's typed state (``Agent(state=Model)``; None without one) as of
    the call's dispatch plus this call's own changes. Change it with ``ctx.state = new``
    or ``await ctx.update_state(fn)``: the change commits with the call's result, or not at
    all (see ``dbos_agents.state``). Changing the model in place is not recorded.
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


def check_name(kind: str, name: str) -> list[str]:
    """Problems with a tool or agent name (empty when it is fine)."""
    problems = []
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        problems.append(
            f"{kind} name {name!r} must match {NAME_PATTERN.pattern} "
            "(a letter, then up to 63 letters, digits, '_' or '-')"
        )
    elif name.startswith(RESERVED_PREFIXES):
        problems.append(
            f"{kind} name {name!r} uses a reserved prefix ({', '.join(RESERVED_PREFIXES)})"
        )
    return problems


def _describe(fn: Callable[..., Any]) -> str:
    doc = inspect.getdoc(fn) or ""
    return doc.split("\n\n", 1)[0].strip()


@dataclass(frozen=True)
class _Signature:
    takes_ctx: bool
    args_model: type[BaseModel]
    output: TypeAdapter[Any] | None
    param_names: tuple[str, ...]


def _parse_signature(fn: Callable[..., Any], tool_name: str, problems: list[str]) -> _Signature:
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:  # unresolved forward reference and the like
        problems.append(f"cannot resolve type hints of {fn.__qualname__}: {exc}")
        hints = {}
    params = list(inspect.signature(fn).parameters.values())
    takes_ctx = bool(params) and hints.get(params[0].name) is ToolContext
    if takes_ctx:
        params = params[1:]
    fields: dict[str, Any] = {}
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            problems.append(f"parameter {p.name!r}: *args and **kwargs are not allowed in tools")
            continue
        if p.kind is p.POSITIONAL_ONLY:
            problems.append(f"parameter {p.name!r}: positional-only parameters are not allowed")
            continue
        if hints.get(p.name) is ToolContext:
            problems.append(f"parameter {p.name!r}: ToolContext must be the first parameter")
            continue
        if p.name not in hints:
            problems.append(f"parameter {p.name!r} has no type annotation")
            continue
        default = ... if p.default is inspect.Parameter.empty else p.default
        fields[p.name] = (hints[p.name], default)
    args_model: type[BaseModel] = BaseModel
    try:
        args_model = create_model(
            f"{tool_name}_arguments",
            __config__=ConfigDict(extra="forbid"),
            **fields,
        )
        args_model.model_json_schema()
    except Exception as exc:
        problems.append(f"arguments cannot form a JSON schema: {exc}")
    output: TypeAdapter[Any] | None = None
    if "return" in hints and hints["return"] is not type(None):
        try:
            output = TypeAdapter(hints["return"])
            output.json_schema()
        except Exception as exc:
            problems.append(f"return type cannot form a JSON schema: {exc}")
            output = None
    return _Signature(takes_ctx, args_model, output, tuple(fields))


class Tool(Generic[P, R]):
    """A server tool. Build it with ``@tool``; call ``.verify`` to add a verify hook."""

    def __init__(
        self,
        fn: Callable[P, R],
        *,
        name: str | None = None,
        description: str | None = None,
        safe_to_retry: bool = False,
        requires_approval: bool = False,
        approval_timeout: timedelta | None = None,
    ) -> None:
        self.name: str = name if name is not None else str(getattr(fn, "__name__", ""))
        problems = check_name("tool", self.name)
        if not callable(fn):
            raise DefinitionError(f"tool {self.name!r}", ["handler is not callable"])
        sig = _parse_signature(fn, self.name, problems)
        if safe_to_retry and requires_approval:
            problems.append("safe_to_retry and requires_approval exclude each other")
        if approval_timeout is not None and not requires_approval:
            problems.append("approval_timeout needs requires_approval=True")
        if approval_timeout is not None and (
            not isinstance(approval_timeout, timedelta) or approval_timeout <= timedelta(0)
        ):
            problems.append(
                f"approval_timeout must be a positive timedelta, got {approval_timeout!r}"
            )
        if problems:
            raise DefinitionError(f"tool {self.name!r}", problems)
        self.fn = fn
        self.description = description if description is not None else _describe(fn)
        self.safe_to_retry = safe_to_retry
        self.requires_approval = requires_approval
        self.approval_timeout = approval_timeout
        self._sig = sig
        self.verify_fn: Callable[..., object] | None = None

    def __repr__(self) -> str:
        return f"Tool({self.name!r}, safe_to_retry={self.safe_to_retry})"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Call the undecorated function, so tools stay unit-testable."""
        return self.fn(*args, **kwargs)

    @functools.cached_property
    def input_schema(self) -> dict[str, JSONValue]:
        """The arguments' JSON schema, built once: every model turn sends it (read-only)."""
        return self._sig.args_model.model_json_schema()

    @property
    def output_schema(self) -> dict[str, JSONValue] | None:
        return None if self._sig.output is None else self._sig.output.json_schema()

    def verify(self, fn: F) -> F:
        """Register the hook that settles an unknown outcome after a crash.

        It takes the same parameters as the tool and returns the tool's result if the effect
        happened, or ``None`` if it did not (the runtime then runs the tool for real).
        """
        problems: list[str] = []
        if self.safe_to_retry:
            problems.append("a safe_to_retry tool is re-run on recovery and needs no verify")
        vsig = _parse_signature(fn, self.name, problems)
        if vsig.param_names != self._sig.param_names:
            problems.append(
                f"verify parameters {list(vsig.param_names)} differ from the tool's "
                f"{list(self._sig.param_names)}"
            )
        if problems:
            raise DefinitionError(f"verify hook of tool {self.name!r}", problems)
        self.verify_fn = fn
        return fn

    def validate_arguments(self, arguments: dict[str, JSONValue]) -> BaseModel:
        """Validate model-supplied arguments; raises ``pydantic.ValidationError``."""
        return self._sig.args_model.model_validate(arguments)

    async def run(self, ctx: ToolContext, args: BaseModel) -> JSONValue:
        """Run the handler and return its output as JSON."""
        return self._dump(await _call(self.fn, self._sig.takes_ctx, ctx, args))

    async def run_verify(self, ctx: ToolContext, args: BaseModel) -> tuple[bool, JSONValue]:
        """Run the verify hook: ``(True, output)`` if the effect happened, ``(False, None)``."""
        assert self.verify_fn is not None
        vsig_ctx = _takes_ctx(self.verify_fn)
        value = await _call(self.verify_fn, vsig_ctx, ctx, args)
        return (False, None) if value is None else (True, self._dump(value))

    def _dump(self, value: Any) -> JSONValue:
        """Validate against the return annotation, then dump to JSON: a handler that
        returns the wrong shape is a tool error, not a surprise for the model."""
        out = self._sig.output or TypeAdapter(Any)
        dumped: JSONValue = out.dump_python(out.validate_python(value), mode="json")
        return dumped


def _takes_ctx(fn: Callable[..., Any]) -> bool:
    params = list(inspect.signature(fn).parameters.values())
    if not params:
        return False
    hints = typing.get_type_hints(fn)
    return hints.get(params[0].name) is ToolContext


async def _call(fn: Callable[..., Any], takes_ctx: bool, ctx: ToolContext, args: BaseModel) -> Any:
    kwargs = {name: getattr(args, name) for name in type(args).model_fields}
    call_args: tuple[Any, ...] = (ctx,) if takes_ctx else ()
    if inspect.iscoroutinefunction(fn):
        return await fn(*call_args, **kwargs)
    result = await asyncio.to_thread(fn, *call_args, **kwargs)
    if inspect.isawaitable(result):
        return await result
    return result


@overload
def tool(fn: Callable[P, R], /) -> Tool[P, R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    safe_to_retry: bool = False,
    requires_approval: bool = False,
    approval_timeout: timedelta | None = None,
) -> Callable[[Callable[P, R]], Tool[P, R]]: ...


def tool(
    fn: Callable[..., object] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    safe_to_retry: bool = False,
    requires_approval: bool = False,
    approval_timeout: timedelta | None = None,
) -> Tool[..., object] | Callable[[Callable[..., object]], Tool[..., object]]:
    """Declare a server tool. Side-effecting (at most once per call) unless ``safe_to_retry``.

    With ``requires_approval=True`` each call waits durably for ``AgentClient.submit_approval``
    (up to ``approval_timeout``, else the agent's ``tool_timeout``, else 5 minutes)."""

    def decorate(f: Callable[..., object]) -> Tool[..., object]:
        return Tool(
            f,
            name=name,
            description=description,
            safe_to_retry=safe_to_retry,
            requires_approval=requires_approval,
            approval_timeout=approval_timeout,
        )

    return decorate if fn is None else decorate(fn)


__all__ = ["Tool", "ToolContext", "ValidationError", "tool"]
