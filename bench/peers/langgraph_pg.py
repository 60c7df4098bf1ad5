"""LangGraph + AsyncPostgresSaver: the scripted conversation, ms per turn, two durability modes.

The usual tool-calling graph: an ``agent`` node calling a chat model, a prebuilt ``ToolNode``
running the one trivial tool, ``tools_condition`` routing between them. The chat model is a
scripted ``BaseChatModel`` (no network): ``turns`` responses that each call the tool once, then
a text answer -- the same conversation as the other peers, through langchain-core's real
model-call path (callbacks, message types).

Durable state is LangGraph's checkpointer: ``AsyncPostgresSaver.from_conn_string`` (one
connection, as its docs show), a checkpoint of the graph state after every superstep, so each
model response and each tool result is in Postgres. It is measured with the default durability
(``"async"``: a superstep's checkpoint is written while the next superstep runs) and with
``durability="sync"`` (written before the next superstep starts), interleaved session by
session. In both modes ``ainvoke`` returns only after every checkpoint write has finished (the
loop waits for its background writes on exit), so the clock stops with everything durable.

A session is one ``graph.ainvoke`` on a new thread id: the clock starts before the call and
stops when it returns; the wall time is divided by the model calls (``turns + 1``), as
bench/turn_overhead.py does for dbos-agents.

    bench/peers/.venv/bin/python bench/peers/langgraph_pg.py --database-url URL

Prints one JSON line per durability mode on stdout (see _common.emit).

``--concurrent N --model-ms L`` is bench/concurrency.py's mode instead: the default
durability only, the checkpointer on an ``AsyncConnectionPool`` (``max_size=20``, the
connection settings LangGraph's docs give for a pool: one connection would serialize the N
sessions on its lock), the scripted model sleeping L ms per call, and N ``ainvoke`` at once
(see _common.burst).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from _common import burst, emit, parse_args, versions
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Durability
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

POOL_MAX_SIZE = 20
"""The concurrency mode's pool, as in LangGraph's docs (``max_size=20``)."""


class ScriptedChat(BaseChatModel):
    """Calls ``charge`` once per turn for ``turns`` turns, then answers "done"."""

    turns: int = 10
    sleep_ms: float = 0.0  # the concurrency mode's model latency (asyncio.sleep per call)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _respond(self, messages: list[BaseMessage]) -> ChatResult:
        turn = sum(1 for m in messages if isinstance(m, AIMessage))
        if turn < self.turns:
            call = {
                "name": "charge",
                "args": {"order_id": f"o{turn}", "cents": 100},
                "id": f"call_{turn}",
                "type": "tool_call",
            }
            message = AIMessage(content="", tool_calls=[call])
        else:
            message = AIMessage(content="done")
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._respond(messages)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        # Overridden so the async path does not hop to a thread like the default does.
        if self.sleep_ms:
            await asyncio.sleep(self.sleep_ms / 1000)
        return self._respond(messages)


@tool
async def charge(order_id: str, cents: int) -> dict[str, object]:
    """Charge an order (trivial)."""
    return {"charged": cents, "order_id": order_id}


def build_graph(model: ScriptedChat, saver: AsyncPostgresSaver) -> CompiledStateGraph[Any]:
    """agent -> (tools -> agent)* -> END, checkpointed by ``saver``."""

    async def agent(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode([charge]))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=saver)


async def timed_session(
    graph: CompiledStateGraph[Any], durability: Durability, turns: int
) -> float:
    """Wall ms of one ``ainvoke`` on a fresh thread, checking the conversation ran fully."""
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    t0 = time.perf_counter()
    out = await graph.ainvoke({"messages": [HumanMessage("go")]}, config, durability=durability)
    ms = (time.perf_counter() - t0) * 1000
    messages = out["messages"]
    # human + (ai, tool) per turn + final ai
    assert len(messages) == 2 * turns + 2 and messages[-1].content == "done", len(messages)
    return ms


async def run(url: str, sessions: int, turns: int) -> None:
    modes: list[tuple[str, Durability]] = [
        ("LangGraph + AsyncPostgresSaver (default durability)", "async"),
        ('LangGraph + AsyncPostgresSaver (durability="sync")', "sync"),
    ]
    results: dict[Durability, list[float]] = {mode: [] for _, mode in modes}
    async with AsyncPostgresSaver.from_conn_string(url) as saver:
        await saver.setup()
        graph = build_graph(ScriptedChat(turns=turns), saver)
        for _, mode in modes:
            await timed_session(graph, mode, turns)  # warm-up
        for _ in range(sessions):  # interleaved, so drift hits both modes equally
            for _, mode in modes:
                results[mode].append(await timed_session(graph, mode, turns) / (turns + 1))
    pkgs = versions(
        "langgraph",
        "langgraph-checkpoint",
        "langgraph-checkpoint-postgres",
        "langchain-core",
        "psycopg",
    )
    for system, mode in modes:
        emit(
            system,
            results[mode],
            turns=turns,
            divisor=turns + 1,
            measures=(
                f'graph.ainvoke(durability="{mode}") on a new thread, returns after all '
                f"checkpoint writes; {turns + 1} model calls + {turns} tool calls; ms / model calls"
            ),
            pkg_versions=pkgs,
        )


PACKAGES = (
    "langgraph",
    "langgraph-checkpoint",
    "langgraph-checkpoint-postgres",
    "langchain-core",
    "psycopg",
    "psycopg-pool",
)


async def concurrent(url: str, sessions: int, turns: int, model_ms: float) -> None:
    """bench/concurrency.py's child: one warm-up session, then ``sessions`` at once."""
    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    pool = AsyncConnectionPool(url, max_size=POOL_MAX_SIZE, kwargs=kwargs, open=False)
    async with pool:
        saver = AsyncPostgresSaver(pool)  # type: ignore[arg-type]
        await saver.setup()
        model = ScriptedChat(turns=turns)
        graph = build_graph(model, saver)
        await timed_session(graph, "async", turns)  # warm-up, no model latency
        model.sleep_ms = model_ms

        async def one(i: int) -> int:
            await timed_session(graph, "async", turns)
            return turns

        await burst(
            sessions,
            one,
            measures=(
                f"graph.ainvoke (default durability) x {sessions} at once, checkpointer on an"
                f" AsyncConnectionPool(max_size={POOL_MAX_SIZE})"
            ),
            versions=versions(*PACKAGES),
        )


def main() -> None:
    args = parse_args(__doc__.split("\n\n")[0])
    if args.concurrent:
        asyncio.run(concurrent(args.database_url, args.concurrent, args.turns, args.model_ms))
        return
    asyncio.run(run(args.database_url, args.sessions, args.turns))


if __name__ == "__main__":
    main()
