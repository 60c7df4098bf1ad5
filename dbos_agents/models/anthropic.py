"""``AnthropicModel``: the ``Model`` protocol over Anthropic's Messages API (``anthropic`` SDK).

- Tools are sent as tool definitions; ``tool_use`` blocks come back as ``ToolCall``s (in
  order, several per reply), their input as JSON text. Tool results go back as
  ``tool_result`` blocks in one user turn (``anthropic_request``).
- The SDK's own retries are off (``max_retries=0``): retries belong to the durable model
  turn, which retries ``TransientModelError`` (429, 529 overloaded, 408, 409, other 5xx,
  timeouts, connection failures) with its backoff, waiting at least the ``retry-after``
  the provider asked for (``TransientModelError.retry_after``). Every other failure
  (400, 401, 403, 404, 413) is a ``ModelError`` naming the provider, the model and the
  status.
- Under the test guard (``dbos_agents.models.guard``: our tests and the demo) a request to
  an endpoint not on this machine raises ``ModelError`` before anything is sent.
- Prompt caching (``cache_prompt=True``, the default): ``cache_control`` breakpoints on
  the system prompt and on the last tool definition, so a loop's turns after the first
  read those from the cache (a tenth of the input price) instead of paying them again.
- Extended thinking (``thinking_budget=``): thinking blocks are kept on the response
  (``ModelResponse.thinking``) and sent back with the assistant message, as the API
  requires within a tool-use loop; they are never text or deltas.
- Cost: ``prices`` or ``PRICES`` (approximate list prices), with cache writes and reads
  priced apart; ``Usage.input_tokens`` counts all input, cached or not.
- ``stream`` yields ``TextDelta``/``ToolCallDelta`` events and one ``Completed``; a reply
  cut mid-stream is a ``TransientModelError``; with ``ModelRequest.continue_from`` the
  partial reply is prefilled and only the new text is returned.

Needs the ``anthropic`` package (``pip install 'dbos-agents[anthropic]'``).
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx2  # the SDK's HTTP client: a connection cut mid-stream surfaces as its error
from anthropic import AsyncAnthropic

from ..errors import ConfigurationError, ModelError, TransientModelError
from ..messages import ModelResponse, Usage
from . import anthropic_request as wire
from .anthropic_stream import EventAssembler, Tokens, response_of
from .base import Completed, ModelEvent, ModelRequest
from .guard import check_model_endpoint
from .per_loop import PerLoop
from .retry_after import retry_after

__all__ = ["PRICES", "SETTINGS", "AnthropicModel", "AnthropicPrice"]

PROVIDER = "anthropic"


@dataclass(frozen=True)
class AnthropicPrice:
    """USD per one million tokens: uncached input, output, and (by default 1.25x and 0.1x
    the input price, Anthropic's five-minute cache) cache writes and cache reads."""

    input_per_mtok: float
    output_per_mtok: float
    cache_write_per_mtok: float | None = None
    cache_read_per_mtok: float | None = None

    def cost(self, tokens: Tokens) -> float:
        write = self.cache_write_per_mtok
        read = self.cache_read_per_mtok
        total = (
            tokens.input * self.input_per_mtok
            + tokens.output * self.output_per_mtok
            + tokens.cache_write * (self.input_per_mtok * 1.25 if write is None else write)
            + tokens.cache_read * (self.input_per_mtok * 0.1 if read is None else read)
        )
        return round(total / 1e6, 10)


PRICES: Mapping[str, AnthropicPrice] = {
    "claude-opus-4-6": AnthropicPrice(5.00, 25.00),
    "claude-opus-4-5": AnthropicPrice(5.00, 25.00),
    "claude-opus-4-1": AnthropicPrice(15.00, 75.00),
    "claude-opus-4-0": AnthropicPrice(15.00, 75.00),
    "claude-sonnet-4-6": AnthropicPrice(3.00, 15.00),
    "claude-sonnet-4-5": AnthropicPrice(3.00, 15.00),
    "claude-sonnet-4-0": AnthropicPrice(3.00, 15.00),
    "claude-3-7-sonnet": AnthropicPrice(3.00, 15.00),
    "claude-haiku-4-5": AnthropicPrice(1.00, 5.00),
    "claude-3-5-haiku": AnthropicPrice(0.80, 4.00),
}
"""Approximate list prices (USD per 1M tokens) when written; they drift, so pass
``prices=`` for exact accounting. Dated snapshots (``claude-sonnet-4-5-20250929``) and
``-latest`` aliases use the price of their base name; ``claude-sonnet-4`` that of
``claude-sonnet-4-0``."""

SETTINGS = ("max_tokens", "stop_sequences", "temperature", "top_p", "top_k")
"""The ``ModelRequest.settings`` keys passed to the API (``max_tokens`` overrides the
model's); other keys are ignored, and a key whose value is ``None`` is not sent. The
sampling keys (``temperature``, ``top_p``, ``top_k``) are no longer parameters of the SDK's
``messages.create`` (2.x): they go in the request body as they are, for the models that
still take them (a model that does not answers with a 400, a ``ModelError``)."""

_SAMPLING = ("temperature", "top_p", "top_k")

PLACEHOLDER_API_KEY = "not-needed"
"""Sent to a ``base_url`` server when no key is configured (local servers ignore it)."""

_SUFFIX = re.compile(r"(-\d{8}|-latest)$")
_TRANSIENT_STATUSES = frozenset({408, 409, 429})


class AnthropicModel:
    """An Anthropic Messages API model (see the module doc).

    ``api_key`` defaults to ``ANTHROPIC_API_KEY``; with ``base_url`` (or
    ``ANTHROPIC_BASE_URL``) and no key, a placeholder key is sent. Construction makes no
    network call and raises ``ConfigurationError`` when no key or endpoint is configured.
    Clients are kept one per event loop (the SDK's pooled connections cannot move).
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens: int = 4096,
        prices: AnthropicPrice | None = None,
        cache_prompt: bool = True,
        thinking_budget: int | None = None,
        timeout: float = 60.0,
    ) -> None:
        if not model:
            raise ConfigurationError("AnthropicModel needs a model name")
        if max_tokens < 1:
            raise ConfigurationError(
                f"AnthropicModel max_tokens must be positive, not {max_tokens}"
            )
        if thinking_budget is not None and not 1024 <= thinking_budget < max_tokens:
            raise ConfigurationError(
                f"AnthropicModel thinking_budget must be at least 1024 and below max_tokens"
                f" ({max_tokens}), not {thinking_budget}"
            )
        self._model = model
        self._max_tokens = max_tokens
        self._prices = prices
        self._cache = cache_prompt
        self._thinking_budget = thinking_budget
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            if base_url is None and not os.environ.get("ANTHROPIC_BASE_URL"):
                raise ConfigurationError(
                    f"{PROVIDER}: AnthropicModel({model!r}) has no API key: pass api_key=, set"
                    " ANTHROPIC_API_KEY, or pass base_url= for a server that needs none"
                )
            key = PLACEHOLDER_API_KEY
        self._client_options: dict[str, Any] = {
            "api_key": key,
            "base_url": base_url,
            "timeout": timeout,
            "max_retries": 0,
        }
        first = AsyncAnthropic(**self._client_options)
        self._clients = PerLoop(lambda: AsyncAnthropic(**self._client_options), first)
        self._base_url = str(first.base_url)

    @property
    def name(self) -> str:
        return self._model

    @property
    def provider(self) -> str:
        """What the loop records as the provider of this model's turns."""
        return PROVIDER

    @property
    def base_url(self) -> str:
        """The API endpoint requests go to."""
        return self._base_url

    @property
    def continues(self) -> bool:
        """True: ``stream`` honours ``ModelRequest.continue_from``."""
        return True

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """One call. With ``continue_from`` the response holds only the new text."""
        check_model_endpoint(self._base_url, self._model)  # tests and the demo: local only
        params, tail = self._params(request)
        try:
            message = await self._client().messages.create(**params)
        except anthropic.AnthropicError as exc:
            raise self._translate(exc) from exc
        response, tokens = response_of(message, tail)
        model = message.model or self._model
        return response.model_copy(update={"usage": self._usage(tokens, model), "model": model})

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream one call: deltas, then one ``Completed`` (after ``continue_from``: only
        the new text)."""
        check_model_endpoint(self._base_url, self._model)
        params, tail = self._params(request)
        try:
            events = await self._client().messages.create(**params, stream=True)
        except anthropic.AnthropicError as exc:
            raise self._translate(exc) from exc
        assembler = EventAssembler(tail)
        async with events:  # closes the connection if the consumer stops early
            try:
                async for event in events:
                    for delta in assembler.feed(event):
                        yield delta
            except httpx2.TransportError as exc:
                raise TransientModelError(
                    f"{PROVIDER}: {self._model} at {self._base_url}: the stream was cut ({exc})"
                ) from exc
            except anthropic.AnthropicError as exc:
                # Mid-stream (an ``error`` event, a dropped connection): a reply cut short.
                error = self._translate(exc)
                if not isinstance(error, TransientModelError):
                    error = TransientModelError(f"{error} (while streaming)")
                raise error from exc
        if not assembler.finished:
            raise TransientModelError(
                f"{PROVIDER}: {self._model} at {self._base_url}: the stream ended before the"
                " reply did"
            )
        model = assembler.model or self._model
        yield Completed(response=assembler.response(self._usage(assembler.tokens, model), model))

    async def aclose(self) -> None:
        """Close the connections this model opened on the running event loop (optional)."""
        client = self._clients.pop()
        if client is not None:
            await client.close()

    # -- internals ---------------------------------------------------------------------------

    def _client(self) -> AsyncAnthropic:
        return self._clients.get()

    def _params(self, request: ModelRequest) -> tuple[dict[str, Any], str]:
        thinking = self._thinking_budget is not None
        messages, tail = wire.messages(request, prefill=not thinking)
        params: dict[str, Any] = {
            "model": self._model,
            "max_tokens": self._max_tokens,
            "messages": messages,
        }
        system = wire.system(request, self._cache)
        if system is not None:
            params["system"] = system
        tools = wire.tools(request.tools, self._cache)
        if tools:
            params["tools"] = tools
        if thinking:
            params["thinking"] = {"type": "enabled", "budget_tokens": self._thinking_budget}
        sampling: dict[str, Any] = {}
        for key in SETTINGS:
            if request.settings.get(key) is not None:
                (sampling if key in _SAMPLING else params)[key] = request.settings[key]
        if sampling:
            params["extra_body"] = sampling
        return params, tail

    def _usage(self, tokens: Tokens, model: str) -> Usage:
        price = self._prices or _price(self._model) or _price(model)
        return Usage(
            input_tokens=tokens.input + tokens.cache_read + tokens.cache_write,
            output_tokens=tokens.output,
            cost_usd=price.cost(tokens) if price else 0.0,
        )

    def _translate(self, exc: anthropic.AnthropicError) -> ModelError:
        where = f"{PROVIDER}: {self._model} at {self._base_url}"
        if isinstance(exc, anthropic.APITimeoutError):
            return TransientModelError(f"{where}: request timed out")
        if isinstance(exc, anthropic.APIConnectionError):
            cause = f" ({exc.__cause__})" if exc.__cause__ else ""
            return TransientModelError(f"{where}: connection failed{cause}")
        if isinstance(exc, anthropic.APIStatusError):
            status = exc.status_code
            details = [f"type {exc.type}"] if exc.type else []
            wait = retry_after(exc.response.headers)
            details += [f"retry-after {wait:g}s"] if wait is not None else []
            details += [f"request id {exc.request_id}"] if exc.request_id else []
            message = exc.api_message or exc.message
            text = f"{where}: HTTP {status}: {message}"
            text += f" ({', '.join(details)})" if details else ""
            overloaded = exc.type in ("overloaded_error", "rate_limit_error", "api_error")
            if status in _TRANSIENT_STATUSES or status >= 500 or overloaded:
                return TransientModelError(text, retry_after=wait)
            return ModelError(text)
        return ModelError(f"{where}: {type(exc).__name__}: {exc}")


def _price(model: str) -> AnthropicPrice | None:
    base = _SUFFIX.sub("", model)
    return PRICES.get(model) or PRICES.get(base) or PRICES.get(f"{base}-0")
