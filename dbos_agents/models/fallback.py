"""``FallbackModel``: the turn goes to the next model when a provider fails for reasons
that are not the request's (``TransientModelError``: overloaded, 5xx, a timeout, a rate
limit), and a failure that is the request's (``ModelError``: a 400, a context too long)
is not hidden behind another model. The answering model's name and provider are on its
response, which the turn records with its usage, so a replay of a recorded turn asks none
of them.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from ..errors import DefinitionError, TransientModelError
from ..messages import ModelResponse
from .base import Completed, Model, ModelEvent, ModelRequest, StreamingModel
from .resolve import model_from

log = logging.getLogger("dbos_agents")


class FallbackModel:
    """``primary``, else each of ``others`` in turn (see the module doc). Streams when any
    of them can (one that cannot gives its reply whole); a model that failed after its
    reply began to show is not replaced mid-reply: the turn is retried (the loop's
    backoff), from ``primary`` again."""

    def __init__(self, primary: Model | str, *others: Model | str) -> None:
        models = tuple(model_from(m) for m in (primary, *others))
        bad = [m for m in models if not isinstance(m, Model)]
        if bad or not others:
            problems = [f"{m!r} does not implement the Model protocol" for m in bad]
            if not others:
                problems.append("give at least one model to fall back to")
            raise DefinitionError("FallbackModel", problems)
        self.models: tuple[Model, ...] = models

    @property
    def name(self) -> str:
        return "fallback(" + ", ".join(m.name for m in self.models) + ")"

    @property
    def continues(self) -> bool:
        """A cut reply is continued only when every model can continue one."""
        return all(isinstance(m, StreamingModel) and m.continues for m in self.models)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        failures: list[TransientModelError] = []
        for model in self.models:
            try:
                return _named(await model.complete(request), model)
            except TransientModelError as exc:
                failures.append(self._failed(model, exc))
        raise _all_failed(failures)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        failures: list[TransientModelError] = []
        for model in self.models:
            shown = False
            try:
                if not isinstance(model, StreamingModel):
                    yield Completed(response=_named(await model.complete(request), model))
                    return
                async for event in model.stream(request):
                    if isinstance(event, Completed):
                        yield Completed(response=_named(event.response, model))
                        return
                    shown = True
                    yield event
                raise TransientModelError(f"model {model.name!r} ended without a reply")
            except TransientModelError as exc:
                if shown:
                    raise
                failures.append(self._failed(model, exc))
        raise _all_failed(failures)

    def _failed(self, model: Model, exc: TransientModelError) -> TransientModelError:
        log.warning(
            "model failed; the turn goes to the next model",
            extra={"event": "model_fallback", "model": model.name, "error": str(exc)},
        )
        return TransientModelError(f"{model.name}: {exc}", retry_after=exc.retry_after)


def _all_failed(failures: list[TransientModelError]) -> TransientModelError:
    """Every model failed: the turn is retried after the shortest wait any of them asked
    for (the first to be ready again), or the loop's backoff if none asked."""
    waits = [f.retry_after for f in failures if f.retry_after is not None]
    return TransientModelError(
        "every model failed: " + "; ".join(map(str, failures)),
        retry_after=min(waits) if len(waits) == len(failures) else None,
    )


def _named(response: ModelResponse, model: Model) -> ModelResponse:
    """The response with the answering model's name and provider (what the turn records),
    where its adapter left them unset: the loop only knows this ``FallbackModel``, which
    is no provider."""
    update: dict[str, str] = {}
    if not response.model:
        update["model"] = model.name
    provider = getattr(model, "provider", None)
    if response.provider is None and isinstance(provider, str):
        update["provider"] = provider
    return response.model_copy(update=update) if update else response
