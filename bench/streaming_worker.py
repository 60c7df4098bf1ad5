"""The worker of bench/streaming.py's latency run: an AgentRuntime whose model streams
pieces that carry the moment they leave the adapter.

Each reply waits ``--lead-ms`` (so every reader is connected before the first piece), then
yields ``--pieces`` text pieces, one every ``--pace-ms``, each ``"<unix time>;"`` stamped
right before the ``yield``. The reader subtracts that stamp from its own clock when the
piece arrives over SSE: the latency from the adapter to the client, on one machine.

    python bench/streaming_worker.py --database-url URL [--pieces 40] [--pace-ms 50]

Prints ``READY`` once launched; SIGTERM stops it.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator

from _lib import cli

from dbos_agents import Agent, AgentRuntime, ModelResponse, Settings
from dbos_agents.models import Completed, ModelEvent, ModelRequest, TextDelta

AGENT = "stamp"


class StampedModel:
    def __init__(self, pieces: int, pace_ms: float, lead_ms: float) -> None:
        self.pieces, self.pace, self.lead = pieces, pace_ms / 1000, lead_ms / 1000

    @property
    def name(self) -> str:
        return "stamped"

    @property
    def continues(self) -> bool:
        return False

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse(text="not streamed")

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        await asyncio.sleep(self.lead)
        text = ""
        for i in range(self.pieces):
            if i:
                await asyncio.sleep(self.pace)
            piece = f"{time.time():.6f};"
            text += piece
            yield TextDelta(text=piece)
        yield Completed(response=ModelResponse(text=text, model=self.name))


async def main() -> None:
    p = cli.parser(__doc__)
    cli.add_database_url(p)
    cli.options(p, pieces=40, pace_ms=50.0, lead_ms=3000.0)
    args = p.parse_args()
    runtime = AgentRuntime(
        [Agent(AGENT)],
        StampedModel(args.pieces, args.pace_ms, args.lead_ms),
        settings=Settings(database_url=args.database_url, executor_id="bench-streaming"),
    )
    await runtime.launch()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print("READY", flush=True)
    await stop.wait()
    await runtime.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
