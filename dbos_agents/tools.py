"""Server tools: ``@tool`` turns a typed function into a tool with schemas and durability rules.

A tool is side-effecting unless declared ``safe_to_retry=True``: the runtime runs it at most
once per tool call, even across crashes. Input and output schemas come from the type hints
(pydantic), and every definition problem is reported at decoration time in one error.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Generic, overload

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError, create_model
from typing_extensions import ParamSpec, TypeVar

from .errors import DefinitionError
from .messages import JSONValue
from .names import check_name
from .tool_context import ToolContext

F = TypeVar("F", bound=Callable[..., object])
P = ParamSpec("P", default=...)
R = TypeVar("R", covariant=True, default=object)
"""A tool keeps its function's signature (``Tool[[str], Awaitable[Order]]``), so calling the
tool directly in a unit test is typed; a bare ``Tool`` accepts any tool."""


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
        durable: bool = False,
        timeout: timedelta | None = None,
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
        problems += _durable_problems(fn, durable, timeout, safe_to_retry, requires_approval)
        if problems:
            raise DefinitionError(f"tool {self.name!r}", problems)
        self.fn = fn
        self.description = description if description is not None else _describe(fn)
        self.safe_to_retry = safe_to_retry
        self.requires_approval = requires_approval
        self.approval_timeout = approval_timeout
        self._sig = sig
        self.verify_fn: Callable[..., object] | None = None
        self.durable = durable
        self.timeout = timeout
        self.recovered_fn: Callable[..., object] | None = None

    def __repr__(self) -> str:
        extra = ", durable=True" if self.durable else ""
        return f"Tool({self.name!r}, safe_to_retry={self.safe_to_retry}{extra})"

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
        if self.durable:
            problems.append(
                "a durable tool settles its inner steps itself (StepOutcomeUnknownError);"
                " use @tool.on_recovered for what a recovered run does"
            )
        self._check_hook(fn, "verify", problems)
        self.verify_fn = fn
        return fn

    def on_recovered(self, fn: F) -> F:
        """Register what a durable tool does when its body is executed again after a crash
        or a deploy, before the body runs: the hook takes the tool's parameters (and
        ``ctx``, whose ``snapshot`` holds the last checkpoint) and returns the tool's result
        to finish with it, or ``None`` to run the body again (completed inner steps return
        their recorded outputs)."""
        problems: list[str] = []
        if not self.durable:
            problems.append("on_recovered is for durable tools (@tool(durable=True))")
        self._check_hook(fn, "on_recovered", problems)
        self.recovered_fn = fn
        return fn

    def _check_hook(self, fn: Callable[..., Any], what: str, problems: list[str]) -> None:
        hsig = _parse_signature(fn, self.name, problems)
        if hsig.param_names != self._sig.param_names:
            problems.append(
                f"{what} parameters {list(hsig.param_names)} differ from the tool's "
                f"{list(self._sig.param_names)}"
            )
        if problems:
            raise DefinitionError(f"{what} hook of tool {self.name!r}", problems)

    def validate_arguments(self, arguments: dict[str, JSONValue]) -> BaseModel:
        """Validate model-supplied arguments; raises ``pydantic.ValidationError``."""
        return self._sig.args_model.model_validate(arguments)

    async def run(self, ctx: ToolContext, args: BaseModel) -> JSONValue:
        """Run the handler and return its output as JSON."""
        return self._dump(await _call(self.fn, self._sig.takes_ctx, ctx, args))

    async def run_verify(self, ctx: ToolContext, args: BaseModel) -> tuple[bool, JSONValue]:
        """Run the verify hook: ``(True, output)`` if the effect happened, ``(False, None)``."""
        assert self.verify_fn is not None
        return await self._run_hook(self.verify_fn, ctx, args)

    async def run_recovered(self, ctx: ToolContext, args: BaseModel) -> tuple[bool, JSONValue]:
        """Run the on_recovered hook: ``(True, output)`` to finish with it, ``(False, None)``
        to run the body again."""
        assert self.recovered_fn is not None
        return await self._run_hook(self.recovered_fn, ctx, args)

    async def _run_hook(
        self, fn: Callable[..., object], ctx: ToolContext, args: BaseModel
    ) -> tuple[bool, JSONValue]:
        value = await _call(fn, _takes_ctx(fn), ctx, args)
        return (False, None) if value is None else (True, self._dump(value))

    def _dump(self, value: Any) -> JSONValue:
        """Validate against the return annotation, then dump to JSON: a handler that
        returns the wrong shape is a tool error, not a surprise for the model."""
        out = self._sig.output or TypeAdapter(Any)
        dumped: JSONValue = out.dump_python(out.validate_python(value), mode="json")
        return dumped


def _durable_problems(
    fn: Callable[..., Any],
    durable: bool,
    timeout: timedelta | None,
    safe_to_retry: bool,
    requires_approval: bool,
) -> list[str]:
    """What a durable tool (or a ``timeout``) must not combine with."""
    problems = []
    if timeout is not None and not durable:
        problems.append("timeout is for durable tools (@tool(durable=True, timeout=...))")
    if timeout is not None and (not isinstance(timeout, timedelta) or timeout <= timedelta(0)):
        problems.append(f"timeout must be a positive timedelta, got {timeout!r}")
    if not durable:
        return problems
    if not inspect.iscoroutinefunction(fn):
        problems.append("a durable tool must be an async function (its steps are awaited)")
    if safe_to_retry:
        problems.append(
            "a durable tool is re-run from its recorded steps; mark its inner"
            " steps safe_to_retry instead"
        )
    if requires_approval:
        problems.append("a durable tool asks for approval inside (await ctx.ask(APPROVAL, ...))")
    return problems


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
    durable: bool = False,
    timeout: timedelta | None = None,
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
    durable: bool = False,
    timeout: timedelta | None = None,
) -> Tool[..., object] | Callable[[Callable[..., object]], Tool[..., object]]:
    """Declare a server tool. Side-effecting (at most once per call) unless ``safe_to_retry``.

    With ``requires_approval=True`` each call waits durably for ``AgentClient.submit_approval``
    (up to ``approval_timeout``, else the agent's ``tool_timeout``, else 5 minutes).

    With ``durable=True`` the body runs as a child workflow of the session: it survives
    crashes and deploys, its ``ctx.step`` calls are recorded one by one, and ``timeout``
    (fixed when it starts) ends it with a ``tool-timeout`` result (``dbos_agents.tool_context``)."""

    def decorate(f: Callable[..., object]) -> Tool[..., object]:
        return Tool(
            f,
            name=name,
            description=description,
            safe_to_retry=safe_to_retry,
            requires_approval=requires_approval,
            approval_timeout=approval_timeout,
            durable=durable,
            timeout=timeout,
        )

    return decorate if fn is None else decorate(fn)


__all__ = ["Tool", "ToolContext", "ValidationError", "tool"]
