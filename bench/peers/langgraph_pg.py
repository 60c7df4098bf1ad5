"""LangGraph + AsyncPostgresSaver: the scripted conversation, ms per turn, two durability modes.

The usual tool-calling graph (an ``agent`` node, a prebuilt ``ToolNode``,
``tools_condition``) with a scripted ``BaseChatModel``, checkpointed by
``AsyncPostgresSaver.from_conn_string`` with the default durability (``"async"``) and with
``durability="sync"``, interleaved session by session; ``ainvoke`` returns only once every
checkpoint is written, so the clock stops with everything durable. ``--concurrent N`` is a
window's child instead (bench/_lib/pgwatch.py): default durability, the checkpointer on an
``AsyncConnectionPool(max_size=20)`` as LangGraph's docs give it. ``--stream`` is the
streaming row instead (bench/streaming.py): the scripted model streams (8-character text
pieces, then the tool call as ``tool_call_chunks``; the answer ~200 characters) and the
session is consumed with ``graph.astream(..., stream_mode="messages")``. Prints one JSON
line per system (see _common.emit).

    bench/peers/.venv/bin/python bench/peers/langgraph_pg.py --database-url URL
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

from _common import burst, emit, parse_args, versions
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.chat_models import generate_from_stream
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
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


async def concurrent(
    url: str, sessions: int, turns: int, model_ms: float, sequential: bool
) -> None:
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
            sequential,
            measures=(
                f"graph.ainvoke (default durability) x {sessions} at once, checkpointer on an"
                f" AsyncConnectionPool(max_size={POOL_MAX_SIZE})"
            ),
            versions=versions(*PACKAGES),
        )


# ---------------------------------------------------------------------------- streaming

SYSTEM = "langgraph_stream"
TOOL_TEXT = "Let me charge that order now. "
ANSWER = (
    "All the orders are charged: each one went through the payment tool once, with the amount "
    "you gave, and every charge was confirmed. Nothing is pending and nothing was retried, so "
    "you are all set for today."
)


def _split(text: str, n: int) -> list[str]:
    return [text[i : i + n] for i in range(0, len(text), n)]


class StreamingScriptedChat(ScriptedChat):
    """The same conversation, streamed: text pieces, then the tool call in pieces."""

    chunk_chars: int = 8

    def _pieces(self, messages: list[BaseMessage]) -> Iterator[AIMessageChunk]:
        turn = sum(1 for m in messages if isinstance(m, AIMessage))
        if turn >= self.turns:
            for piece in _split(ANSWER, self.chunk_chars):
                yield AIMessageChunk(content=piece)
            return
        for piece in _split(TOOL_TEXT, self.chunk_chars):
            yield AIMessageChunk(content=piece)
        yield AIMessageChunk(
            content="",
            tool_call_chunks=[{"name": "charge", "args": "", "id": f"call_{turn}", "index": 0}],
        )
        args = json.dumps({"order_id": f"o{turn}", "cents": 100})
        for piece in _split(args, self.chunk_chars):
            yield AIMessageChunk(
                content="",
                tool_call_chunks=[{"name": None, "args": piece, "id": None, "index": 0}],
            )

    def _respond(self, messages: list[BaseMessage]) -> ChatResult:
        # The non-streaming path (no streaming callback attached) gives the same message.
        return generate_from_stream(ChatGenerationChunk(message=m) for m in self._pieces(messages))

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        for message in self._pieces(messages):
            yield ChatGenerationChunk(message=message)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        # Overridden so the async path does not hop to a thread like the default does.
        for message in self._pieces(messages):
            yield ChatGenerationChunk(message=message)


async def streamed_session(graph: CompiledStateGraph[Any], turns: int) -> tuple[float, int]:
    """Wall ms and chunks of one streamed session on a fresh thread, checking it ran fully."""
    config: Any = {"configurable": {"thread_id": str(uuid.uuid4())}}
    chunks = 0
    t0 = time.perf_counter()
    async for _chunk, _meta in graph.astream(
        {"messages": [HumanMessage("go")]}, config, stream_mode="messages"
    ):
        chunks += 1
    ms = (time.perf_counter() - t0) * 1000
    messages = (await graph.aget_state(config)).values["messages"]
    ais = [m for m in messages if isinstance(m, AIMessage)]
    assert len(ais) == turns + 1 and ais[-1].content == ANSWER, (len(ais), ais[-1].content)
    assert all(len(m.tool_calls) == 1 for m in ais[:-1]), ais[0]
    assert len(messages) == 2 * turns + 2, len(messages)
    return ms, chunks


async def run_streamed(url: str, sessions: int, turns: int) -> None:
    """``--stream``: the default durability, consumed as a token stream."""
    async with AsyncPostgresSaver.from_conn_string(url) as saver:
        await saver.setup()
        graph = build_graph(StreamingScriptedChat(turns=turns), saver)
        await streamed_session(graph, turns)  # warm-up
        timed = [await streamed_session(graph, turns) for _ in range(sessions)]
    emit(
        SYSTEM,
        [ms / (turns + 1) for ms, _ in timed],
        turns=turns,
        divisor=turns + 1,
        measures=(
            'async for in graph.astream(stream_mode="messages") (default durability) on a new'
            f" thread, to the end of the iteration (all checkpoint writes done); {turns + 1}"
            " streamed model calls (8-char chunks, tool calls as tool_call_chunks)"
            f" + {turns} tool calls; ~{statistics.median(c for _, c in timed)} chunks consumed"
            " per session; ms / model calls"
        ),
        pkg_versions=versions(*PACKAGES),
    )


def main() -> None:
    args = parse_args(__doc__.split("\n\n")[0])
    if args.stream:
        asyncio.run(run_streamed(args.database_url, args.sessions, args.turns))
        return
    if args.concurrent:
        asyncio.run(
            concurrent(
                args.database_url, args.concurrent, args.turns, args.model_ms, args.sequential
            )
        )
        return
    asyncio.run(run(args.database_url, args.sessions, args.turns))


if __name__ == "__main__":
    main()
