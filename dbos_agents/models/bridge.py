"""``PydanticAIModel``: every provider Pydantic AI's model classes speak (Gemini, Bedrock,
Mistral, Groq, Cohere, OpenRouter, Ollama, ...), through our ``Model`` protocol.

Pydantic AI is used as a library of provider clients only (``pydantic_ai.direct``): our
loop keeps the turn, its record, its retries and its live stream; Pydantic AI's agent,
tools and retries are not involved.

- The provider SDK's own retries are off for every request (``max_retries=0``): a failure
  is the loop's to retry, once, with its backoff. Failures Pydantic AI files as transient
  (rate limit, overloaded, 5xx, timeout, connection) become ``TransientModelError`` with
  the ``retry_after`` the provider asked for; the rest (rejected request, authentication,
  unknown model, a context too long, a reply that is not the documented shape) become
  ``ModelError``. Both name the provider and the model (the run's error adds the agent).
- A reply cut mid-stream is continued (``continues``): the shown part goes back as the
  model's partial turn, followed by a request to carry on without repeating it (a prefill
  is not portable across providers); only the new text is returned.
- Cost: ``prices`` if given, else the ``genai-prices`` data Pydantic AI ships, else 0.
- Under the test guard (``guard``) a request to an endpoint not on this machine raises
  ``ModelError`` before anything is sent; a model without an endpoint (Bedrock's SDK
  resolves its own) is refused there too, except Pydantic AI's local test models.

Needs ``pydantic-ai-slim`` with the provider's extra (``pip install
'dbos-agents[pydantic-ai]' 'pydantic-ai-slim[google]'``).
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from pydantic_ai import exceptions as pe
from pydantic_ai import models as pai
from pydantic_ai import settings as ps
from pydantic_ai.direct import model_request, model_request_stream

from ..errors import ConfigurationError, ModelError, TransientModelError
from ..messages import ModelResponse, Usage
from . import bridge_wire as wire
from .base import Completed, ModelEvent, ModelRequest
from .guard import check_model_endpoint, real_models_blocked
from .openai import Price
from .per_loop import PerLoop

__all__ = ["PydanticAIModel"]

_LOCAL_SYSTEMS = frozenset({"test", "function"})
"""Pydantic AI's in-process models (``TestModel``, ``FunctionModel``): nothing to guard."""

_TRANSIENT = (
    pe.ModelRateLimitError,
    pe.ModelUnavailableError,
    pe.ModelServerError,
    pe.ModelConnectionError,
    pe.ModelRequestTimeout,
)
_TRANSIENT_STATUSES = frozenset({408, 409, 429})


def _transport_errors() -> tuple[type[Exception], ...]:
    """The HTTP clients' transport errors: some provider SDKs let them through unwrapped
    (google-genai on a client built by the user, when a stream is cut)."""
    found: list[type[Exception]] = []
    for name in ("httpx", "httpx2"):
        with contextlib.suppress(ImportError):
            found.append(importlib.import_module(name).TransportError)
    return tuple(found)


_TRANSPORT_ERRORS = _transport_errors()


class PydanticAIModel:
    """A model of any provider Pydantic AI supports (see the module doc).

    ``model``: a ``"provider:model"`` name (``"google-gla:gemini-2.5-flash"``, built with
    the provider's defaults, its key from its environment variable), a Pydantic AI
    ``Model``, or a function returning one (called once per event loop: its HTTP client
    is then never shared across loops). ``settings``: Pydantic AI ``ModelSettings`` sent
    with every request (a request's own settings win). A name Pydantic AI does not know
    or a provider without its key is a ``ConfigurationError`` here, not a failed run.
    """

    def __init__(
        self,
        model: str | pai.Model | Callable[[], pai.Model],
        *,
        prices: Price | None = None,
        settings: ps.ModelSettings | None = None,
    ) -> None:
        self._source = model
        self._prices = prices
        self._settings: dict[str, Any] = dict(settings or {})
        first = self._build()
        self._models = PerLoop(self._build, first)
        self._name = first.model_name
        self._system = first.system
        self._base_url = first.base_url

    @property
    def name(self) -> str:
        return self._name

    @property
    def provider(self) -> str:
        """Pydantic AI's name of the provider (``google-gla``, ``groq``, ``bedrock``...)."""
        return self._system

    @property
    def base_url(self) -> str | None:
        return self._base_url

    @property
    def continues(self) -> bool:
        """True: a cut reply is continued by a continuation request (see the module doc)."""
        return True

    async def complete(self, request: ModelRequest) -> ModelResponse:
        model, messages, settings, params = self._prepare(request)
        try:
            reply = await model_request(
                model,
                messages,
                model_settings=settings,  # type: ignore[arg-type]
                model_request_parameters=params,
                instrument=False,
            )
        except Exception as exc:
            raise self._translate(exc) from exc
        return self._finish(wire.response_of(reply), reply)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        model, messages, settings, params = self._prepare(request)
        folder = wire.EventFolder()
        try:
            async with model_request_stream(
                model,
                messages,
                model_settings=settings,  # type: ignore[arg-type]
                model_request_parameters=params,
                instrument=False,
            ) as events:
                async for event in events:
                    for delta in folder.feed(event):
                        yield delta
                reply = events.get()
        except ModelError:
            raise
        except Exception as exc:
            error = self._translate(exc)
            if not isinstance(error, TransientModelError) and folder.text:
                error = TransientModelError(f"{error} (while streaming)")
            raise error from exc
        yield Completed(response=self._finish(wire.response_of(reply, folder.text), reply))

    # -- internals ---------------------------------------------------------------------------

    def _build(self) -> pai.Model:
        source = self._source
        try:
            built = pai.infer_model(source) if isinstance(source, str) else source
            if not isinstance(built, pai.Model) and callable(built):
                built = built()
        except (pe.UserError, ValueError, ImportError) as exc:
            raise ConfigurationError(f"PydanticAIModel({source!r}): {exc}") from exc
        if not isinstance(built, pai.Model):
            raise ConfigurationError(
                f"PydanticAIModel needs a 'provider:model' name, a pydantic_ai Model or a"
                f" function returning one, not {type(built).__name__}"
            )
        return built

    def _model(self) -> pai.Model:
        return self._source if isinstance(self._source, pai.Model) else self._models.get()

    def _prepare(
        self, request: ModelRequest
    ) -> tuple[pai.Model, list[Any], dict[str, Any], pai.ModelRequestParameters]:
        self._guard()
        settings = dict(self._settings)
        settings.update(
            {k: request.settings[k] for k in wire.SETTINGS if request.settings.get(k) is not None}
        )
        settings["max_retries"] = 0  # retries are the durable turn's
        params = pai.ModelRequestParameters(function_tools=wire.tools(request.tools))
        return self._model(), wire.messages(request, self._system), settings, params

    def _guard(self) -> None:
        if self._base_url is not None:
            check_model_endpoint(self._base_url, self._name)
        elif real_models_blocked() and self._system not in _LOCAL_SYSTEMS:
            check_model_endpoint(f"{self._system}://remote", self._name)

    def _finish(self, response: ModelResponse, reply: Any) -> ModelResponse:
        usage = reply.usage
        model = reply.model_name or self._name
        if self._prices is not None:
            cost = self._prices.cost(usage.input_tokens, usage.output_tokens)
        else:
            cost = _listed_cost(reply)
        return response.model_copy(
            update={
                "model": model,
                "usage": Usage(
                    input_tokens=usage.input_tokens,
                    output_tokens=usage.output_tokens,
                    cost_usd=cost,
                ),
            }
        )

    def _translate(self, exc: Exception) -> ModelError:
        where = f"{self._system}: {self._name}"
        if isinstance(exc, pe.ModelAPIError):
            status = getattr(exc, "status_code", None)
            text = f"{where}: {'HTTP ' + str(status) + ': ' if status else ''}{exc.message}"
            transient = isinstance(exc, _TRANSIENT) or (
                status is not None and (status in _TRANSIENT_STATUSES or status >= 500)
            )
            if transient:
                return TransientModelError(text, retry_after=exc.retry_after)
            return ModelError(text)
        if isinstance(exc, pe.UnexpectedModelBehavior):
            return ModelError(f"{where}: the reply is not in the documented shape: {exc}")
        if isinstance(exc, (OSError, TimeoutError, *_TRANSPORT_ERRORS)):
            return TransientModelError(f"{where}: connection failed ({exc})")
        return ModelError(f"{where}: {type(exc).__name__}: {exc}")


def _listed_cost(reply: Any) -> float:
    """The reply's list price from ``genai-prices``, 0 for a model it does not list."""
    try:
        return round(float(reply.cost().total_price), 10)
    except Exception:  # an unlisted model, a reply without usage: cost unknown
        return 0.0
