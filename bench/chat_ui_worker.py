"""The worker of bench/chat_ui.py: an AgentRuntime whose model streams pieces that carry
their index and the moment they leave the adapter, ``"<i>:<unix time>;"``.

- ``stamp``: waits ``--lead-ms`` plus a random 0..``--jitter-ms``, then yields ``--pieces``
  pieces, one every ``--pace-ms``, each stamped right before its ``yield``.
- ``asker``: its first turn calls the client tool ``confirm`` (run in the page); its second
  turn streams the pieces at once (no lead: the round trip is measured through it).

    python bench/chat_ui_worker.py --database-url URL [--pieces 20] [--pace-ms 50]
        [--lead-ms 500] [--jitter-ms 50]

Prints ``READY`` once launched; SIGTERM stops it.
"""

from __future__ import annotations

import asyncio
import random
import signal
import time
from collections.abc import AsyncIterator

from _lib import cli
from _lib.asker import confirm

from dbos_agents import Agent, AgentRuntime, ModelResponse, Settings, ToolCall
from dbos_agents.models import Completed, ModelEvent, ModelRequest, TextDelta, ToolCallDelta

STAMP, ASKER = "stamp", "asker"
CALL_ID, TOOL = "call_confirm", "confirm"
ARGS = '{"question": "go ahead?"}'
"""The tool call ``asker``'s first turn makes, its arguments as text."""


def piece(i: int) -> str:
    """Piece ``i``, stamped now: the Node client checks the indices and reads the stamp."""
    return f"{i}:{time.time():.6f};"


class StampedModel:
    def __init__(self, pieces: int, pace_ms: float, lead_ms: float, jitter_ms: float) -> None:
        self.pieces, self.pace = pieces, pace_ms / 1000
        self.lead, self.jitter = lead_ms / 1000, jitter_ms / 1000

    @property
    def name(self) -> str:
        return "stamped"

    @property
    def continues(self) -> bool:
        return False

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse(text="not streamed")

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if request.agent == ASKER and not any(m.role == "assistant" for m in request.messages):
            yield ToolCallDelta(index=0, id=CALL_ID, name=TOOL, arguments=ARGS)
            tool_call = ToolCall(id=CALL_ID, name=TOOL, arguments=ARGS)
            yield Completed(response=ModelResponse(tool_calls=[tool_call], model=self.name))
            return
        if request.agent == STAMP:
            await asyncio.sleep(self.lead + random.random() * self.jitter)
        text = ""
        for i in range(self.pieces):
            if i:
                await asyncio.sleep(self.pace)
            p = piece(i)
            text += p
            yield TextDelta(text=p)
        yield Completed(response=ModelResponse(text=text, model=self.name))


async def main() -> None:
    p = cli.parser(__doc__)
    cli.add_database_url(p)
    cli.options(p, pieces=20, pace_ms=50.0, lead_ms=500.0, jitter_ms=50.0)
    args = p.parse_args()
    runtime = AgentRuntime(
        [Agent(STAMP), Agent(ASKER, tools=[confirm], max_turns=3)],
        StampedModel(args.pieces, args.pace_ms, args.lead_ms, args.jitter_ms),
        settings=Settings(database_url=args.database_url, executor_id="bench-chat-ui"),
    )
    await runtime.launch()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print("READY", flush=True)
    await stop.wait()
    await runtime.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
