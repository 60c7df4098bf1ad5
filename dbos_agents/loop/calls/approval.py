"""An approval-gated server tool call: a human approves or denies it first; an approved call
then runs under the at-most-once guard as the DBOS step ``dbos_agents.tool.v1:<tool>``."""

from __future__ import annotations

from typing import ClassVar

from dbos import DBOS

from ...agent import Agent
from ...delivery import ApprovalDelivery, ErrorDelivery
from ...results import ToolResult
from ...store.calls import CallKind
from ..ledger import WaitSpec
from .base import CallResult, Planned, Turn
from .server import approved_step
from .waiting import mismatch, timeout_result, wait_for_submission


class ApprovalKind:
    name: ClassVar[CallKind] = "approval"
    concurrent: ClassVar[bool] = False
    dispatched_on_open: ClassVar[bool] = False

    def wait(self, agent: Agent, p: Planned) -> WaitSpec | None:
        return WaitSpec.of(agent, p.call, "approval", None)

    async def prepare(self, turn: Turn, p: Planned) -> object:
        return None

    async def run(self, turn: Turn, p: Planned, prepared: object) -> CallResult:
        cid, name = p.call.id, p.call.name
        delivery = await wait_for_submission(turn.spec, "approval", name, cid, turn.deadlines[cid])
        if delivery is None:
            timeout = turn.agent.wait_timeout(name).total_seconds()
            return CallResult(timeout_result(cid, name, timeout), waited=True)
        if isinstance(delivery, ErrorDelivery):
            result = ToolResult.failure(cid, name, "client-error", delivery.error)
            return CallResult(result, waited=True)
        if not isinstance(delivery, ApprovalDelivery):
            return CallResult(mismatch(cid, name, delivery), waited=True)
        if not delivery.approved:
            denied = ToolResult.failure(
                cid,
                name,
                "approval-denied",
                "A human denied this call"
                + (f" ({delivery.decided_by})" if delivery.decided_by else "")
                + (f": {delivery.reason}" if delivery.reason else "."),
            )
            return CallResult(denied, waited=True)
        tool = turn.agent.tools[name]
        out = await DBOS.run_step_async(
            {"name": f"dbos_agents.tool.v1:{name}"}, approved_step, turn.spec, p.call, tool, p.args
        )
        return CallResult(ToolResult.model_validate(out), recorded=True, waited=True)
