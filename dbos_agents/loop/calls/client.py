"""A client-tool call: the browser (or a script) runs it and submits its result; the wait
opened with the model turn that made the call, already ``dispatched``."""

from __future__ import annotations

import json
from typing import ClassVar

from pydantic import ValidationError

from ...agent import Agent
from ...delivery import ErrorDelivery, ResultDelivery
from ...results import ToolResult
from ...store.calls import CallKind
from ..ledger import WaitSpec
from .base import CallResult, Planned, Turn
from .waiting import mismatch, timeout_result, wait_for_submission


class ClientKind:
    name: ClassVar[CallKind] = "client"
    concurrent: ClassVar[bool] = False
    dispatched_on_open: ClassVar[bool] = True

    def wait(self, agent: Agent, p: Planned) -> WaitSpec | None:
        tool = agent.client_tools[p.call.name]
        return WaitSpec.of(agent, p.call, "client", tool.output_schema)

    async def prepare(self, turn: Turn, p: Planned) -> object:
        return None

    async def run(self, turn: Turn, p: Planned, prepared: object) -> CallResult:
        cid, name = p.call.id, p.call.name
        delivery = await wait_for_submission(turn.spec, "client", name, cid, turn.deadlines[cid])
        if delivery is None:
            result = timeout_result(cid, name, turn.agent.wait_timeout(name).total_seconds())
        elif isinstance(delivery, ErrorDelivery):
            result = ToolResult.failure(cid, name, "client-error", delivery.error)
        elif isinstance(delivery, ResultDelivery):
            result = _checked(turn.agent, cid, name, delivery.result)
        else:
            result = mismatch(cid, name, delivery)
        return CallResult(result, waited=True)


def _checked(agent: Agent, tool_call_id: str, name: str, result: object) -> ToolResult:
    """The submitted result, validated against the client tool's output model as declared
    (the submit checked only the JSON schema stored with the wait): a mismatch becomes an
    error result the model reads, never a failed run."""
    try:
        agent.client_tools[name].output.model_validate(result)
    except ValidationError as exc:
        return ToolResult.failure(
            tool_call_id,
            name,
            "client-error",
            f"the submitted result does not match the output model of {name!r}",
            details=json.loads(exc.json(include_url=False, include_context=False)),
        )
    return ToolResult.success(tool_call_id, name, result)  # type: ignore[arg-type]
