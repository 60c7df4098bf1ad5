"""A sub-agent call: the child agent runs as a child workflow (``{parent}::sub::{call}``),
started in call order and awaited after; marked ``dispatched`` as the turn's waits open."""

from __future__ import annotations

from typing import Any, ClassVar, cast

from dbos import DBOS, SetWorkflowID, WorkflowHandleAsync
from dbos import error as dbos_errors

from ...agent import Agent
from ...ids import child_session_id
from ...outcome import RunOutcome, RunSpec
from ...records import PageInput, forwarded_props_of, with_page
from ...results import ToolResult
from ...store.calls import CallKind
from ...traces.carrier import of_span
from ..ledger import WaitSpec
from .base import CallResult, Planned, RunInterrupted, SubAgentTask, Turn


class SubAgentKind:
    name: ClassVar[CallKind] = "subagent"
    concurrent: ClassVar[bool] = False
    dispatched_on_open: ClassVar[bool] = True

    def wait(self, agent: Agent, p: Planned) -> WaitSpec | None:
        return None

    async def prepare(self, turn: Turn, p: Planned) -> object:
        """Start the child workflow (deterministic id); returns its handle."""
        parent_wf = DBOS.workflow_id
        assert parent_wf is not None and isinstance(p.args, SubAgentTask)
        child = child_session_id(parent_wf, p.call.id)
        spec = turn.spec
        child_spec = RunSpec(
            session_id=child,
            root_session_id=spec["root_session_id"],
            parent_session_id=spec["session_id"],
            agent=turn.agent.sub_agents[p.call.name].name,
            run_seq=1,
            message=p.args.message,
            user_id=spec["user_id"],
            tenant_id=spec["tenant_id"],
        )
        cast("dict[str, object]", child_spec).update(of_span(turn.spans.get(p.call.id)))
        props = forwarded_props_of(spec)  # the page's props reach the sub-agent's tools
        if props is not None:
            child_spec = with_page(child_spec, PageInput(forwarded_props=props))
        with SetWorkflowID(child):
            return await DBOS.start_workflow_async(turn.workflow, child_spec)

    async def run(self, turn: Turn, p: Planned, prepared: object) -> CallResult:
        handle = cast("WorkflowHandleAsync[Any]", prepared)
        cid, name = p.call.id, p.call.name
        try:
            outcome = RunOutcome.model_validate(await handle.get_result())
        except dbos_errors.DBOSAwaitedWorkflowCancelledError:  # the child was interrupted
            raise RunInterrupted(cid) from None
        if outcome.status == "interrupted":
            raise RunInterrupted(cid)
        if outcome.status == "completed":
            return CallResult(ToolResult.success(cid, name, outcome.output or ""))
        failed = ToolResult.failure(
            cid,
            name,
            "subagent-failed",
            f"The sub-agent stopped with status {outcome.status}"
            + (f": {outcome.error}" if outcome.error else ""),
        )
        return CallResult(failed)
