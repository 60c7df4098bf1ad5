"""No ``Any`` in public signatures: every function and public method exported from
``dbos_agents`` says what it takes and returns (``JSONValue``, TypeVars, models)."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Iterator

import pytest

import dbos_agents

ALLOWED: dict[str, str] = {
    "Agent.__init__": "instructions may be a function of the agent's own state model",
    "ToolContext.state": "the agent's state model: ToolContext is not generic in it",
    "ToolContext.update_state": "a function of the agent's state model (as ToolContext.state)",
    "AgentClient.state": "the implementation behind typed overloads (JSON, or model=M -> M)",
    "AsyncAgentClient.state": "the implementation behind typed overloads (as AgentClient's)",
}
"""``qualname -> why``: keep it tiny; every entry is a debt."""


def _has_any(t: object) -> bool:
    if t is typing.Any:
        return True
    return any(_has_any(a) for a in typing.get_args(t))


def _callables(name: str, obj: object) -> Iterator[tuple[str, Callable[..., object]]]:
    """The object, or a class's own public methods and properties (not pydantic's)."""
    if not inspect.isclass(obj):
        if callable(obj):
            yield name, obj
        return
    for klass in obj.__mro__:
        if not klass.__module__.startswith("dbos_agents"):
            continue
        for attr, member in vars(klass).items():
            if attr.startswith("_") and attr not in ("__init__", "__call__"):
                continue
            if isinstance(member, staticmethod | classmethod):
                member = member.__func__
            if isinstance(member, property) and member.fget is not None:
                member = member.fget
            if isinstance(member, functools.cached_property):
                member = member.func
            if inspect.isfunction(member):
                yield f"{obj.__name__}.{attr}", member


def _public() -> list[tuple[str, Callable[..., object]]]:
    found: dict[str, Callable[..., object]] = {}
    for name in dbos_agents.__all__:
        for qual, fn in _callables(name, getattr(dbos_agents, name)):
            found.setdefault(qual, fn)
    return sorted(found.items())


PUBLIC = _public()


def test_the_walk_covers_the_clients() -> None:
    names = {q for q, _ in PUBLIC}
    assert {"AgentClient.submit_tool_result", "AsyncAgentClient.events", "tool"} <= names
    assert {"Tool.__call__", "AgentClient.sessions", "AgentRuntime.start"} <= names


@pytest.mark.parametrize(("qualname", "fn"), PUBLIC, ids=[q for q, _ in PUBLIC])
def test_no_any_in_public_signatures(qualname: str, fn: Callable[..., object]) -> None:
    if qualname in ALLOWED:
        pytest.skip(ALLOWED[qualname])
    # Names a module imports only for type checking (an import cycle) resolve from the
    # package's public namespace.
    public = {name: getattr(dbos_agents, name) for name in dbos_agents.__all__}
    hints = typing.get_type_hints(fn, localns=public)
    offending = {k: v for k, v in hints.items() if _has_any(v)}
    assert not offending, f"{qualname} has Any in {offending}"


def test_the_check_can_fail() -> None:
    def loose(x: typing.Any) -> dict[str, typing.Any]:
        return {}

    assert all(_has_any(v) for v in typing.get_type_hints(loose).values())
