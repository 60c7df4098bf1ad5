"""Client tools: tools that run outside the worker (a browser, a human) and answer later.

The workflow registers a pending call and waits durably on ``DBOS.recv_async`` (no thread
held) until a result is submitted through ``AgentClient`` or the deadline passes.
"""

from __future__ import annotations

import functools
from datetime import timedelta
from typing import Any

import jsonschema
from pydantic import BaseModel, RootModel

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


# --- frontend tools: declared by a chat page for one run ----------------------------------


class AnyJSON(RootModel[Any]):
    """Any JSON value: a frontend tool's output (whatever the page posts)."""


def schema_problem(schema: object) -> str | None:
    """Why ``schema`` is not a JSON schema for a tool's input (None: it is one)."""
    if not isinstance(schema, dict):
        return "must be a JSON schema object"
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        return f"is not a valid JSON schema: {exc.message}"
    if schema.get("type", "object") != "object":
        return 'must describe an object ("type": "object")'
    return None


class FrontendTool(ClientTool):
    """A client tool a chat page declares for one run (AG-UI ``RunAgentInput.tools``; an
    agent opts in with ``Agent(frontend_tools=...)``): the page's JSON schema is its input
    schema, and its output is the JSON the page posts back."""

    def __init__(
        self,
        name: str,
        *,
        parameters: dict[str, Any],
        description: str = "",
        timeout: timedelta | None = None,
    ) -> None:
        problems = check_name("frontend tool", name)
        problem = schema_problem(parameters)
        if problem is not None:
            problems.append(f"parameters {problem}")
        if problems:
            raise DefinitionError(f"frontend tool {name!r}", problems)
        super().__init__(
            name, input=AnyJSON, output=AnyJSON, timeout=timeout, description=description
        )
        self.description = description  # not the output model's doc
        self.parameters = parameters
        self._validator = jsonschema.validators.validator_for(parameters)(parameters)

    def __repr__(self) -> str:
        return f"FrontendTool({self.name!r})"

    @functools.cached_property
    def input_schema(self) -> dict[str, JSONValue]:
        return self.parameters

    @functools.cached_property
    def output_schema(self) -> dict[str, JSONValue]:
        return {}

    def validate_arguments(self, arguments: dict[str, JSONValue]) -> BaseModel:
        """The arguments checked against the page's schema (``ValueError``: a tool error
        the model reads)."""
        error = jsonschema.exceptions.best_match(self._validator.iter_errors(arguments))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(the arguments)"
            raise ValueError(f"{where}: {error.message}")
        return AnyJSON(arguments)
