"""LangGraph + AsyncPostgresSaver, ms per turn while streaming the model's tokens.

The streaming row of the peers: the graph, tool and checkpointer of langgraph_pg.py (imported
from it: ``build_graph``, ``charge``, ``ScriptedChat``), but the scripted chat model streams
(``_astream``/``_stream`` yield ``ChatGenerationChunk(message=AIMessageChunk(...))`` pieces)
and the session is consumed as a token stream. A tool-calling turn streams a short text in
``--chunk-chars`` pieces (default 8), then its tool call as ``tool_call_chunks``: id and name
in the first, the JSON arguments split over the next ones. The answer turn streams a ~200
character text the same way. Same conversation as langgraph_pg.py: ``--turns`` turns that
each call ``charge`` once, then the answer.

The agent node calls ``model.ainvoke`` as usual; under ``stream_mode="messages"`` LangGraph
attaches its streaming callback, so langchain-core drives ``_astream`` and forwards every
chunk to the stream while assembling the full message for the state. Durable state is
LangGraph's checkpointer, ``AsyncPostgresSaver.from_conn_string`` (one connection), with the
default durability (``"async"``): a checkpoint after every superstep, written while the next
one runs, and all of them finished before the stream ends.

A session is ``async for chunk, meta in graph.astream(..., stream_mode="messages")`` on a new
thread id, counting the chunks consumed: the clock starts before the call and stops at the end
of the iteration; afterwards (off the clock) the thread's final state is checked for
``turns + 1`` AI messages. The wall time is divided by the model calls (``turns + 1``).

    bench/peers/.venv/bin/python bench/peers/langgraph_stream.py --database-url URL \\
        [--sessions 20] [--turns 10] [--chunk-chars 8]

Prints one JSON line on stdout (see _common.emit), then a second line with the stream's shape
(``"system": "langgraph_stream/chunks"``: chunks per session, by message type).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import Any

from _common import emit, parse_args, versions
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import generate_from_stream
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph_pg import PACKAGES, ScriptedChat, build_graph, charge

SYSTEM = "langgraph_stream"
TOOL_TEXT = "Let me charge that order now. "
ANSWER = (
    "All the orders are charged: each one went through the payment tool once, with the amount "
    "you gave, and every charge was confirmed. Nothing is pending and nothing was retried, so "
    "you are all set for today."
)

assert charge.name == "charge"  # the tool the script calls, as registered by build_graph


def _split(text: str, n: int) -> list[str]:
    return [text[i : i + n] for i in range(0, len(text), n)]


class StreamingScriptedChat(ScriptedChat):
    """langgraph_pg's conversation, streamed: text pieces, then the tool call in pieces."""

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


async def timed_session(
    graph: CompiledStateGraph[Any], turns: int, kinds: Counter[str]
) -> tuple[float, int]:
    """Wall ms and chunks of one streamed session on a fresh thread, checking it ran fully."""
    config: Any = {"configurable": {"thread_id": str(uuid.uuid4())}}
    chunks = 0
    t0 = time.perf_counter()
    async for chunk, _meta in graph.astream(
        {"messages": [HumanMessage("go")]}, config, stream_mode="messages"
    ):
        chunks += 1
        kinds[type(chunk).__name__] += 1
    ms = (time.perf_counter() - t0) * 1000
    messages = (await graph.aget_state(config)).values["messages"]
    ais = [m for m in messages if isinstance(m, AIMessage)]
    assert len(ais) == turns + 1 and ais[-1].content == ANSWER, (len(ais), ais[-1].content)
    assert all(len(m.tool_calls) == 1 for m in ais[:-1]), ais[0]
    assert len(messages) == 2 * turns + 2, len(messages)
    return ms, chunks


async def run(url: str, sessions: int, turns: int, chunk_chars: int) -> None:
    async with AsyncPostgresSaver.from_conn_string(url) as saver:
        await saver.setup()
        graph = build_graph(StreamingScriptedChat(turns=turns, chunk_chars=chunk_chars), saver)
        await timed_session(graph, turns, Counter())  # warm-up
        kinds: Counter[str] = Counter()
        per_turn: list[float] = []
        per_session: list[int] = []
        for _ in range(sessions):
            ms, chunks = await timed_session(graph, turns, kinds)
            per_turn.append(ms / (turns + 1))
            per_session.append(chunks)
    emit(
        SYSTEM,
        per_turn,
        turns=turns,
        divisor=turns + 1,
        measures=(
            'async for in graph.astream(stream_mode="messages") (default durability) on a new'
            f" thread, to the end of the iteration (all checkpoint writes done); {turns + 1}"
            f" streamed model calls ({chunk_chars}-char chunks, tool calls as tool_call_chunks)"
            f" + {turns} tool calls; ~{statistics.median(per_session)} chunks consumed per"
            " session; ms / model calls"
        ),
        pkg_versions=versions(*PACKAGES),
    )
    print(
        json.dumps(
            {
                "system": f"{SYSTEM}/chunks",
                "chunk_chars": chunk_chars,
                "chunks_per_session_median": statistics.median(per_session),
                "chunks_per_session_min": min(per_session),
                "chunks_per_session_max": max(per_session),
                "chunks_by_type_per_session": {k: v / sessions for k, v in sorted(kinds.items())},
            }
        ),
        flush=True,
    )


def main() -> None:
    # _common.parse_args takes the shared flags only; --chunk-chars is taken off argv first.
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--chunk-chars", type=int, default=8, help="characters per streamed chunk")
    known, rest = pre.parse_known_args()
    sys.argv[1:] = rest
    args = parse_args(__doc__.split("\n\n")[0] + " Also: --chunk-chars N (default 8).")
    if known.chunk_chars < 1:
        sys.exit("--chunk-chars must be at least 1")
    if args.concurrent:
        sys.exit("--concurrent is not supported by langgraph_stream.py")
    asyncio.run(run(args.database_url, args.sessions, args.turns, known.chunk_chars))


if __name__ == "__main__":
    main()
