"""The dbos-agents process of bench/concurrency.py: one AgentRuntime (default settings, as
``dbos-agents worker`` runs it) that also starts the sessions, through ``runtime.start`` and
``handle.result()``, as the peers start theirs in their own processes.

The agent calls the side-effecting tool ``charge`` once per turn for ``--turns`` turns,
then answers; the model is a ``ScriptedModel`` behind a ``Model`` whose ``complete`` first
sleeps ``--model-ms`` (``asyncio.sleep``, like a network call). After one warm-up session
(no sleep) the window is bench/peers/_common.burst's: ``READY``, ``GO`` on stdin,
``--concurrent`` sessions at once, ``DONE {json}``, and an exit without shutdown once stdin
closes (the shutdown's transactions are not the window's).

    python bench/concurrency_ours.py --database-url URL --concurrent 200 --turns 10 --model-ms 50
"""

from __future__ import annotations

import argparse
import asyncio

from _lib import cli
from peers._common import add_concurrency_args, burst

from dbos_agents import Agent, AgentRuntime, ModelResponse, Settings, ToolContext, tool
from dbos_agents.models import ModelRequest, ScriptedModel, call, calls

AGENT = "bench"


@tool
async def charge(ctx: ToolContext, order_id: str, cents: int) -> dict[str, object]:
    """Charge an order (trivial; side-effecting, so run at most once)."""
    return {"charged": cents, "key": ctx.idempotency_key}


class SleepingModel:
    """A ``ScriptedModel`` that plays ``turns`` tool-calling turns and an answer, each after
    ``sleep_ms`` of ``asyncio.sleep`` (set after the warm-up)."""

    def __init__(self, turns: int) -> None:
        self.turns = turns
        self.sleep_ms = 0.0
        self._inner = ScriptedModel(respond=self._respond, name="scripted-sleeping")

    def _respond(self, request: ModelRequest) -> str | ModelResponse:
        turn = sum(1 for m in request.messages if m.role == "assistant")
        if turn < self.turns:
            return calls(call("charge", {"order_id": f"o{turn}", "cents": 100}))
        return "done"

    @property
    def name(self) -> str:
        return self._inner.name

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if self.sleep_ms:
            await asyncio.sleep(self.sleep_ms / 1000)
        return await self._inner.complete(request)


async def run(url: str, sessions: int, turns: int, model_ms: float) -> None:
    model = SleepingModel(turns)
    rt = AgentRuntime(
        [Agent(AGENT, tools=[charge], max_turns=turns + 1)],
        model,
        settings=Settings(database_url=url, executor_id="bench-concurrency", log_level="ERROR"),
    )
    await rt.launch()

    async def one(i: int) -> int:
        out = await (await rt.start(AGENT, f"go {i}")).result()
        if out.status != "completed" or out.turns != turns + 1:
            raise RuntimeError(f"session {i}: {out.status}, {out.turns} turns ({out.error})")
        return turns

    try:
        await one(-1)  # warm-up, no model latency
        model.sleep_ms = model_ms
        await burst(
            sessions,
            one,
            measures=f"runtime.start -> handle.result() x {sessions} at once, in the worker",
            versions=cli.versions(),
        )
    finally:
        await rt.shutdown()


def main() -> None:
    p = cli.parser(__doc__)
    p.add_argument("--database-url", required=True)
    p.add_argument("--turns", type=int, default=10, help="tool-calling turns per session")
    add_concurrency_args(p)
    args: argparse.Namespace = p.parse_args()
    if args.concurrent < 1 or args.turns < 1:
        p.error("--concurrent and --turns must be at least 1")
    asyncio.run(run(args.database_url, args.concurrent, args.turns, args.model_ms))


if __name__ == "__main__":
    main()
