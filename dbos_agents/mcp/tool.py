"""An MCP server's tool as one of a run's tools.

The loop makes the call's first ``tools/call`` round under the at-most-once guard of a
server tool (``loop/calls/mcp.py``: ``round``, then ``settle``). A server that asks
questions first hands the call to a continuation, a durable tool whose body is ``run``:
each question a durable wait of the session (``ctx.ask``'s machinery: ``pending``, the
inbox, the chat routes), each later round an inner step, at most once unless the server's
policy says the tool may run again (``MCPServer.policy``); the answers and the recorded
``requestState`` retry the call from whichever worker runs it. An unknown outcome is
settled by the tool's ``verify`` hook or reported to the model.
"""

from __future__ import annotations

from typing import NoReturn

from pydantic import BaseModel, RootModel

from ..delivery import ResultDelivery
from ..errors import AskTimeoutError, MCPServerError, StepFailedError, StepOutcomeUnknownError
from ..messages import JSONValue
from ..results import ToolResult, durability_error
from ..tool_context import FormAsk, ToolContext
from ..tools import Tool
from . import wire
from .server import ListedTool, MCPServer, Policy
from .validate import check_arguments

MAX_ROUNDS = 10
"""Rounds of questions one call may take before it fails (the SDK's own default)."""
UNKNOWN_RETRIES = 3
"""Attempts of a call that may run again, when an attempt gets no answer."""


class Arguments(RootModel[dict[str, JSONValue]]):
    """An MCP call's arguments, checked against the server's schema (``validate``)."""


class MCPToolError(Exception):
    """The server answered the call with a tool error; the model reads its text."""


class MCPTool(Tool[..., object]):
    """One tool of a server's recorded list, under the name the model sees."""

    def __init__(
        self, server: MCPServer, listed: ListedTool, name: str, first: wire.Outcome | None = None
    ) -> None:
        # Not ``Tool.__init__``: the schema is the server's, not a function's signature.
        self.name = name
        self.description = listed.description or f"{listed.name} (MCP server {server.name})"
        self.requires_approval = False
        self.approval_timeout = None
        self.durable = True
        self.timeout = None
        self.verify_fn = None
        self.recovered_fn = None
        self.fn = _not_callable
        self.server = server
        self.listed = listed
        self.policy: Policy = server.policy(listed)
        self.safe_to_retry = self.policy.retry
        self.first = first
        """The first round's questions, in a continuation (``run`` starts from them)."""

    def ref(self, first: wire.Outcome | None = None) -> dict[str, JSONValue]:
        """What a continuation needs to rebuild this tool (``DurableJob.mcp``)."""
        out: dict[str, JSONValue] = {
            "server": self.server.name,
            "tool": self.listed.model_dump(mode="json"),
        }
        if first is not None:
            out["first"] = first.model_dump(mode="json")
        return out

    async def round(
        self,
        arguments: dict[str, JSONValue],
        key: str,
        responses: dict[str, JSONValue] | None = None,
        state: str | None = None,
    ) -> wire.Outcome:
        """One ``tools/call`` round (a tool that may run again is sent again when no answer
        came back)."""
        return await _round(
            self.server, self.listed.name, self.policy.retry, arguments, key, responses, state
        )

    async def settle(
        self, cid: str, arguments: dict[str, JSONValue], key: str, out: wire.Outcome
    ) -> ToolResult | wire.Outcome:
        """A first round's outcome as the call's result; the questions it asks are given
        back (for a continuation). An unknown outcome goes to ``verify``: its result if the
        effect happened, else the round once more; without a hook it is the model's
        durability error."""
        if out.kind == "unknown" and not self.policy.retry:
            hook = self.server.verify.get(self.listed.name)
            if hook is None:
                return durability_error(cid, self.name, out.error)
            try:
                done = await hook(arguments)
            except Exception as exc:
                return durability_error(
                    cid, self.name, f"verify failed: {type(exc).__name__}: {exc}"
                )
            if done is not None:
                return ToolResult.success(cid, self.name, done, verified=True)
            out = await self.round(arguments, key)
        if out.kind == "input":
            return out
        if out.kind == "result" and not out.is_error:
            return ToolResult.success(cid, self.name, out.output)
        if out.kind == "unknown" and not self.policy.retry:
            return durability_error(cid, self.name, out.error)
        text = out.output if out.kind == "result" else out.error
        return ToolResult.failure(
            cid, self.name, "tool-error", f"MCP server {self.server.name!r}: {text}"
        )

    def __repr__(self) -> str:
        return f"MCPTool({self.name!r}, server={self.server.name!r}, retry={self.policy.retry})"

    @property
    def input_schema(self) -> dict[str, JSONValue]:
        return self.listed.input_schema

    @property
    def output_schema(self) -> dict[str, JSONValue] | None:
        return None

    def validate_arguments(self, arguments: dict[str, JSONValue]) -> Arguments:
        check_arguments(self.listed.input_schema, arguments)
        return Arguments(arguments)

    async def run(self, ctx: ToolContext, args: BaseModel) -> JSONValue:
        """The call: rounds until the server answers (module doc)."""
        assert isinstance(args, Arguments)
        arguments = args.root
        responses: dict[str, JSONValue] | None = None
        state: str | None = None
        if self.first is not None:  # a continuation: the first round asked these
            responses, state = await self._answer(ctx, self.first), self.first.state
        verified = False
        for _ in range(MAX_ROUNDS):
            try:
                out = await ctx.step(
                    f"tools/call {self.listed.name}",
                    _round,
                    self.server,
                    self.listed.name,
                    self.policy.retry,
                    arguments,
                    ctx.idempotency_key,
                    responses,
                    state,
                    safe_to_retry=self.policy.retry,
                )
            except StepOutcomeUnknownError as exc:  # a crash mid-round
                out = wire.Outcome(kind="unknown", error=str(exc))
            except StepFailedError as exc:  # nothing was sent (the server is down)
                raise MCPToolError(exc.detail) from None
            if out.kind == "unknown":
                if verified or self.listed.name not in self.server.verify:
                    self._unknown(ctx, out.error)
                settled = await ctx.step(
                    f"verify {self.listed.name}",
                    self.server.verify[self.listed.name],
                    arguments,
                    safe_to_retry=True,
                )
                if settled is not None:
                    return settled
                verified = True  # it did not happen: send the round again
                continue
            if out.kind == "result":
                if out.is_error:
                    raise MCPToolError(f"MCP server {self.server.name!r}: {out.output}")
                return out.output
            if out.kind == "stale":  # the server's key rotated or the state expired
                responses, state = None, None
                continue
            responses, state = await self._answer(ctx, out), out.state
        raise MCPServerError(
            self.server.name, f"still asking for input after {MAX_ROUNDS} rounds", self.name
        )

    def _unknown(self, ctx: ToolContext, why: str | None) -> NoReturn:
        raise StepOutcomeUnknownError(
            f"tools/call {self.listed.name} on MCP server {self.server.name!r}"
            + (f" ({why})" if why else ""),
            1,
            ctx.idempotency_key,
        )

    async def _answer(self, ctx: ToolContext, out: wire.Outcome) -> dict[str, JSONValue]:
        """The server's questions, each a durable wait of the session; a form's answer is
        ``accept`` with the submitted content, an error submitted is ``decline``, and no
        answer before the deadline is ``cancel``."""
        assert ctx.durable is not None
        answers: dict[str, JSONValue] = {}
        for key, request in out.requests.items():
            method = request.get("method")
            params = request.get("params")
            p = params if isinstance(params, dict) else {}
            if method == "roots/list":
                answers[key] = {"roots": []}
                continue
            if method != "elicitation/create":
                raise MCPServerError(
                    self.server.name, f"asks for {method}, which dbos-agents does not answer"
                )
            schema = p.get("requestedSchema")
            shown: dict[str, JSONValue] = {
                "message": p.get("message", ""),
                "server": self.server.name,
                "tool": self.listed.name,
            }
            if p.get("mode") == "url":
                shown["url"] = p.get("url")
            ask = FormAsk(
                self.name,
                schema if isinstance(schema, dict) else {"type": "object", "properties": {}},
                shown,
            )
            try:
                delivery = await ctx.durable.ask(ask, None, None)
            except AskTimeoutError:
                answers[key] = {"action": "cancel"}
                continue
            if isinstance(delivery, ResultDelivery):
                content = delivery.result if p.get("mode") != "url" else None
                answers[key] = {"action": "accept", "content": content}
            else:
                answers[key] = {"action": "decline"}
        return answers


async def _round(
    server: MCPServer,
    tool: str,
    retry: bool,
    arguments: dict[str, JSONValue],
    key: str,
    responses: dict[str, JSONValue] | None,
    state: str | None,
) -> wire.Outcome:
    """One round, as an inner step: a tool that may run again is sent again when no answer
    came back; the others report the unknown outcome. (A module function: the step's
    output type is read once per function, not once per run's tool object.)"""
    out = await wire.call(server, tool, arguments, key, responses, state)
    tries = 1
    while out.kind == "unknown" and retry and tries < UNKNOWN_RETRIES:
        tries += 1
        out = await wire.call(server, tool, arguments, key, responses, state)
    return out


def _not_callable(*_args: object, **_kwargs: object) -> NoReturn:
    raise TypeError("an MCP tool is called by a run (through its agent), not directly")
