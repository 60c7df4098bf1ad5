"""``FallbackModel`` on its own: the next model on a transient failure, not on the
request's; streaming falls through only before a reply began to show."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from dbos_agents import DefinitionError, ModelError, ModelResponse, TransientModelError
from dbos_agents.models import (
    Completed,
    FallbackModel,
    ModelEvent,
    ModelRequest,
    ScriptedModel,
    TextDelta,
)

REQ = ModelRequest(agent="a", instructions="", messages=[], tools=[])


class Broken:
    def __init__(self, error: Exception, after_pieces: int = 0) -> None:
        self.name, self.error, self.after = "broken", error, after_pieces
        self.continues = True

    async def complete(self, request: ModelRequest) -> ModelResponse:
        raise self.error

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        for i in range(self.after):
            yield TextDelta(text=f"piece {i} ")
        raise self.error


def events(model: FallbackModel) -> list[ModelEvent]:
    async def go() -> list[ModelEvent]:
        return [e async for e in model.stream(REQ)]

    return asyncio.run(go())


def test_a_transient_failure_goes_to_the_next_model_which_is_named_on_the_answer() -> None:
    model = FallbackModel(Broken(TransientModelError("529")), ScriptedModel(["ok"], name="b"))
    answer = asyncio.run(model.complete(REQ))
    assert (answer.text, answer.model) == ("ok", "b")
    last = events(model)[-1]
    assert isinstance(last, Completed) and last.response.model == "b"


def test_the_request_s_own_failure_is_not_hidden() -> None:
    model = FallbackModel(Broken(ModelError("400 too long")), ScriptedModel(["ok"]))
    with pytest.raises(ModelError, match="400 too long"):
        asyncio.run(model.complete(REQ))


def test_every_model_failing_is_one_transient_error_naming_each() -> None:
    model = FallbackModel(Broken(TransientModelError("529")), Broken(TransientModelError("503")))
    with pytest.raises(TransientModelError, match="broken: 529; broken: 503"):
        asyncio.run(model.complete(REQ))


@pytest.mark.parametrize(
    ("waits", "retry_after"), [((30.0, 5.0), 5.0), ((30.0, None), None), ((None, None), None)]
)
def test_every_model_failing_waits_the_shortest_wait_all_asked_for(
    waits: tuple[float | None, float | None], retry_after: float | None
) -> None:
    model = FallbackModel(*(Broken(TransientModelError("429", retry_after=w)) for w in waits))
    for attempt in (lambda: asyncio.run(model.complete(REQ)), lambda: events(model)):
        with pytest.raises(TransientModelError) as caught:
            attempt()
        assert caught.value.retry_after == retry_after  # one that asked nothing may be ready


def test_a_stream_that_failed_after_showing_pieces_is_not_replaced_mid_reply() -> None:
    model = FallbackModel(Broken(TransientModelError("cut"), after_pieces=2), ScriptedModel(["x"]))
    with pytest.raises(TransientModelError, match="cut"):
        events(model)


def test_definition_errors() -> None:
    with pytest.raises(DefinitionError, match="at least one model to fall back to"):
        FallbackModel(ScriptedModel(["x"]))
    with pytest.raises(DefinitionError, match="does not implement the Model protocol"):
        FallbackModel(ScriptedModel(["x"]), 42)  # type: ignore[arg-type]
