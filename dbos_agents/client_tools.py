"""Client tools: tools that run outside the worker (a browser, a human) and answer later.

The workflow registers a pending call and waits durably on ``DBOS.recv_async`` (no thread
held) until a result is submitted through ``AgentClient`` or the deadline passes.
"""

from __future__ import annotations

import functools
from datetime import timedelta

from pydantic import BaseModel

from .errors import DefinitionError
from .messages import JSONValue
from .names import check_name

DEFAULT_TIMEOUT = timedelta(minutes=5)
"""The last link of the timeout chain: per tool, then per agent, then this."""


class ClientTool:
    """A tool whose result is submitted by a client. Build it with ``client_tool``."""

    def __init__(
        self,
        name: str,
        *,
        input: type[BaseModel],
        output: type[BaseModel],
        timeout: timedelta | None = None,
        description: str = "",
    ) -> None:
        problems = check_name("client tool", name)
        for label, model in (("input", input), ("output", output)):
            if not (isinstance(model, type) and issubclass(model, BaseModel)):
                problems.append(f"{label} must be a pydantic BaseModel subclass, got {model!r}")
        if timeout is not None and (not isinstance(timeout, timedelta) or timeout <= timedelta(0)):
            problems.append(f"timeout must be a positive timedelta, got {timeout!r}")
        if problems:
            raise DefinitionError(f"client tool {name!r}", problems)
        self.name = name
        self.input = input
        self.output = output
        self.timeout = timeout
        self.description = description or (input.__doc__ or "").strip().split("\n\n")[0]

    def __repr__(self) -> str:
        return f"ClientTool({self.name!r})"

    @functools.cached_property
    def input_schema(self) -> dict[str, JSONValue]:
        """Built once: every model turn sends it (read-only)."""
        return self.input.model_json_schema()

    @functools.cached_property
    def output_schema(self) -> dict[str, JSONValue]:
        """Built once: every wait stores it (read-only)."""
        return self.output.model_json_schema()

    def validate_arguments(self, arguments: dict[str, JSONValue]) -> BaseModel:
        return self.input.model_validate(arguments)


def client_tool(
    name: str,
    *,
    input: type[BaseModel],
    output: type[BaseModel],
    timeout: timedelta | None = None,
    description: str = "",
) -> ClientTool:
    """Declare a client tool: the model calls it, a client submits its ``output``."""
    return ClientTool(name, input=input, output=output, timeout=timeout, description=description)
