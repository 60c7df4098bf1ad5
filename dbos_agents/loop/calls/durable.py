"""A durable tool call (``@tool(durable=True)``): its body runs as a child workflow
(``{parent}::tool::{call}``, ``loop.durable``), started in call order and awaited after;
marked ``dispatched`` as the turn's waits open. The child records the result in the call's
ledger row before it returns it."""

from __future__ import annotations

from typing import Any, ClassVar, cast

from dbos import DBOS, SetWorkflowID, WorkflowHandleAsync
from dbos import error as dbos_errors

from ...agent import Agent
from ...ids import durable_workflow_id
from ...outcome import RunSpec
from ...results import ToolResult
from ...store.calls import CallKind
from ...traces.carrier import of_span
from ..durable.workflow import INTERRUPTED, DurableJob, durable_tool_workflow
from ..ledger import WaitSpec
from .base import CallResult, Planned, RunInterrupted, Turn


class DurableKind:
    name: ClassVar[CallKind] = "durable"
    concurrent: ClassVar[bool] = False
    dispatched_on_open: ClassVar[bool] = True

    def wait(self, agent: Agent, p: Planned) -> WaitSpec | None:
        return None

    async def prepare(self, turn: Turn, p: Planned) -> object:
        """Start the child workflow (deterministic id); returns its handle."""
        parent_wf = DBOS.workflow_id
        assert parent_wf is not None
        spec = turn.spec
        if p.call.id in turn.spans:  # traced: its steps' spans go under the call's
            spec = cast("RunSpec", {**spec, **of_span(turn.spans[p.call.id])})
        job = DurableJob(
            spec=spec,
            tool=p.call.name,
            tool_call_id=p.call.id,
            arguments=p.call.arguments,
            turn=turn.number,
        )
        with SetWorkflowID(durable_workflow_id(parent_wf, p.call.id)):
            return await DBOS.start_workflow_async(durable_tool_workflow, job)

    async def run(self, turn: Turn, p: Planned, prepared: object) -> CallResult:
        handle = cast("WorkflowHandleAsync[Any]", prepared)
        cid, name = p.call.id, p.call.name
        try:
            result = ToolResult.model_validate(await handle.get_result())
        except dbos_errors.DBOSAwaitedWorkflowCancelledError:  # an interrupt cancelled it
            raise RunInterrupted(cid) from None
        except dbos_errors.DBOSException:
            raise
        except Exception as exc:  # the body's workflow failed outside the body (an outage)
            failed = ToolResult.failure(cid, name, "tool-error", f"{type(exc).__name__}: {exc}")
            return CallResult(failed)
        if result.error is not None and result.error.kind == INTERRUPTED:
            raise RunInterrupted(cid)
        return CallResult(result, recorded=True)
