"""Pydantic AI + DBOS durable execution: the scripted conversation, ms per turn.

The peer closest to dbos-agents: the same DBOS on the same Postgres. The agent has the
``DBOSDurability`` capability (every model request a DBOS step) and its tool is a
``@DBOS.step``; the run is ``agent.run`` inside a ``@DBOS.workflow``. The raw-DBOS floor
(2 trivial async steps per turn) is measured in the same process, interleaved session by
session. ``--concurrent N --model-ms L`` is a window's child instead (bench/_lib/pgwatch.py).
Prints one JSON line per system (see _common.emit).

    bench/peers/.venv/bin/python bench/peers/pydantic_ai_dbos.py --database-url URL
"""

from __future__ import annotations

import asyncio
import logging
import time

from _common import burst, emit, parse_args, versions
from dbos import DBOS, DBOSConfig
from pydantic_ai import Agent
from pydantic_ai.durable_exec.dbos import DBOSDurability
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

TURNS = 10  # set from --turns before the first run
SLEEP_S = 0.0  # the concurrency mode's model latency, set after its warm-up


def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Scripted model: call the tool while fewer than TURNS responses exist, then answer."""
    turn = sum(1 for m in messages if isinstance(m, ModelResponse))
    if turn < TURNS:
        args = {"order_id": f"o{turn}", "cents": 100}
        return ModelResponse(parts=[ToolCallPart("charge", args, tool_call_id=f"call_{turn}")])
    return ModelResponse(parts=[TextPart("done")])


@DBOS.step(name="peers.charge")
async def charge(order_id: str, cents: int) -> dict[str, object]:
    """Charge an order (trivial): a DBOS step, so its result is checkpointed once."""
    return {"charged": cents, "order_id": order_id}


async def respond_sleeping(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The concurrency mode's model: ``respond`` after an ``asyncio.sleep(SLEEP_S)``."""
    if SLEEP_S:
        await asyncio.sleep(SLEEP_S)
    return respond(messages, info)


agent = Agent(
    FunctionModel(respond, model_name="scripted"),
    name="peers_bench",
    tools=[charge],
    capabilities=[DBOSDurability()],
)
sleeping_agent = Agent(
    FunctionModel(respond_sleeping, model_name="scripted"),
    name="peers_bench_sleeping",
    tools=[charge],
    capabilities=[DBOSDurability()],
)
AGENT = [agent]  # the agent ``session`` runs; --concurrent swaps in sleeping_agent


@DBOS.workflow(name="peers.pydantic_ai_session")
async def session(prompt: str) -> tuple[str, int]:
    """One conversation: the whole agent run is this workflow's body."""
    result = await AGENT[0].run(prompt)
    return result.output, len(result.all_messages())


@DBOS.step(name="peers.raw_model")
async def raw_model(i: int) -> dict[str, object]:
    return {"tool_calls": [{"name": "charge", "arguments": {"order_id": f"o{i}", "cents": 100}}]}


@DBOS.step(name="peers.raw_tool")
async def raw_tool(i: int) -> dict[str, object]:
    return {"charged": 100, "i": i}


@DBOS.workflow(name="peers.raw_loop")
async def raw_loop(turns: int) -> int:
    """The floor: 2 trivial async steps per turn, nothing else."""
    for i in range(turns):
        await raw_model(i)
        await raw_tool(i)
    return turns


def dbos_url(url: str) -> str:
    """DBOS's engine wants the psycopg (v3) driver named in the URL."""
    for prefix in ("postgresql+psycopg://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    raise ValueError("not a postgresql:// URL")


async def timed_session(prompt: str) -> float:
    """Wall ms from starting the workflow to its result, checking the conversation ran fully."""
    t0 = time.perf_counter()
    handle = await DBOS.start_workflow_async(session, prompt)
    output, n_messages = await handle.get_result()
    ms = (time.perf_counter() - t0) * 1000
    # request + (response, tool return) per turn + final response
    assert output == "done" and n_messages == 2 * TURNS + 2, (output, n_messages)
    return ms


async def timed_floor() -> float:
    t0 = time.perf_counter()
    await (await DBOS.start_workflow_async(raw_loop, TURNS)).get_result()
    return (time.perf_counter() - t0) * 1000


def launch(url: str) -> None:
    config: DBOSConfig = {
        "name": "peers-pydantic-ai",
        "system_database_url": dbos_url(url),
        "executor_id": "peers-bench",
        "log_level": "ERROR",
    }
    DBOS(config=config)
    DBOS.launch()


async def concurrent(url: str, sessions: int, model_ms: float, sequential: bool) -> None:
    """bench/concurrency.py's child: one warm-up session, then ``sessions`` at once."""
    global SLEEP_S
    AGENT[0] = sleeping_agent
    launch(url)
    try:
        await timed_session("warm-up")  # no model latency yet
        SLEEP_S = model_ms / 1000

        async def one(i: int) -> int:
            await timed_session(f"go {i}")
            return TURNS

        await burst(
            sessions,
            one,
            sequential,
            measures=(
                f"DBOS.start_workflow_async(workflow running agent.run) x {sessions} at once"
                " -> get_result()"
            ),
            versions=versions("pydantic-ai-slim", "dbos", "psycopg"),
        )
    finally:
        DBOS.destroy()


async def run(url: str, sessions: int) -> None:
    launch(url)
    try:
        await timed_session("warm-up")
        await timed_floor()
        ours: list[float] = []
        floor: list[float] = []
        for i in range(sessions):  # interleaved, so drift hits both equally
            floor.append(await timed_floor() / TURNS)
            ours.append(await timed_session(f"go {i}") / (TURNS + 1))
    finally:
        DBOS.destroy()
    pkgs = versions("pydantic-ai-slim", "dbos", "psycopg")
    emit(
        "Pydantic AI + DBOS (capability, tool as step)",
        ours,
        turns=TURNS,
        divisor=TURNS + 1,
        measures=(
            "DBOS.start_workflow_async(workflow running agent.run) -> get_result(); "
            f"{TURNS + 1} model steps + {TURNS} tool steps checkpointed; ms / model calls"
        ),
        pkg_versions=pkgs,
    )
    emit(
        "raw DBOS async workflow, 2 trivial steps per turn",
        floor,
        turns=TURNS,
        divisor=TURNS,
        measures="DBOS.start_workflow_async -> get_result(); 2 async steps per turn; ms / turns",
        pkg_versions=pkgs,
        floor=True,
    )


def main() -> None:
    global TURNS
    args = parse_args(__doc__.split("\n\n")[0])
    TURNS = args.turns
    logging.getLogger("dbos").setLevel(logging.ERROR)
    if args.concurrent:
        asyncio.run(concurrent(args.database_url, args.concurrent, args.model_ms, args.sequential))
        return
    asyncio.run(run(args.database_url, args.sessions))


if __name__ == "__main__":
    main()
