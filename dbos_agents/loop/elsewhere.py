"""A run of an agent this worker does not run goes back to its agent's queue, unrun.

Runs are enqueued on their agent's queue, which only workers running the agent dequeue
(``AgentRuntime.queues``). A run can still reach another worker: enqueued on the shared
queue by an earlier release, or a child workflow (sub-agent, durable tool) recovered onto
DBOS's internal queue after a crash or an adoption. Failing it there would lose the user's
message; instead its workflow returns to the agent's queue before it does anything
(``_dbos.hand_back``) and waits for a worker that runs the agent.
"""

from __future__ import annotations

import asyncio
from typing import NoReturn

from dbos import DBOS

from .. import _dbos, logs
from ..ids import agent_queue
from ..outcome import RunSpec
from .context import get_context


async def hand_back(spec: RunSpec) -> NoReturn:
    """End this execution of the workflow unrun, its row back on the queue of
    ``spec``'s agent; DBOS records no outcome for it."""
    wf = DBOS.workflow_id
    assert wf is not None
    queue = agent_queue(get_context().settings.queue_name, spec["agent"])
    moved = await _dbos.hand_back(wf, queue)
    logs.run_handed_back(spec, queue, moved)
    raise asyncio.CancelledError
