"""``OpenAIModel``: the ``Model`` protocol over OpenAI chat completions (or any compatible server).

- Tools are sent as function tools with ``parallel_tool_calls=True``; tool-call arguments come
  back as the raw text the model produced, malformed or not (the runtime turns bad JSON into
  an invalid-arguments result the model reads).
- The SDK's own retries are off (``max_retries=0``): retries belong to the durable model turn,
  which retries ``TransientModelError`` (429, 408, 409, 5xx, timeouts, connection failures)
  with backoff, waiting at least the ``retry-after-ms``/``retry-after`` the provider asked
  for (``TransientModelError.retry_after``); every other provider failure is a ``ModelError``, and so is a 429 whose code
  is ``insufficient_quota`` (an exhausted billing quota does not come back by waiting).
- Under the test guard (``dbos_agents.models.guard``: our tests and the demo) a request to
  an endpoint not on this machine raises ``ModelError`` before anything is sent.
- Cost comes from ``prices`` or from ``PRICES``, a small table of approximate list prices;
  a model in neither costs ``0.0``.
- ``stream`` asks for the reply as server-sent chunks (usage included) and yields them as
  ``TextDelta``/``ToolCallDelta`` events; a reply cut mid-stream (a dropped connection, a
  timeout) is a ``TransientModelError``. With ``ModelRequest.continue_from`` it asks for the
  rest of a reply already shown, in one of two styles (``continuation=``; see
  ``openai_stream``).

Needs the ``openai`` package (``pip install openai``); the rest of dbos_agents does not.
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import openai
from openai import AsyncOpenAI
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionMessageFunctionToolCallParam,
    ChatCompletionMessageParam,
)

from ..errors import ConfigurationError, ModelError, TransientModelError
from ..messages import Message, ModelResponse, ToolCall, Usage
from .base import Completed, ModelEvent, ModelRequest, ToolSpec
from .guard import check_model_endpoint
from .openai_stream import CONTINUE_PROMPT, ChunkAssembler, Continuation, continued
from .per_loop import PerLoop
from .retry_after import retry_after

__all__ = ["CONTINUE_PROMPT", "PRICES", "SETTINGS", "OpenAIModel", "Price"]


@dataclass(frozen=True)
class Price:
    """USD per one million input (prompt) and output (completion) tokens."""

    input_per_mtok: float
    output_per_mtok: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return round(
            (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1e6, 10
        )


PRICES: Mapping[str, Price] = {
    "gpt-4.1": Price(2.00, 8.00),
    "gpt-4.1-mini": Price(0.40, 1.60),
    "gpt-4.1-nano": Price(0.10, 0.40),
    "gpt-4o": Price(2.50, 10.00),
    "gpt-4o-mini": Price(0.15, 0.60),
}
"""Approximate standard-tier list prices (USD per 1M tokens, uncached input) when written;
they drift and ignore cached-input discounts, so pass ``prices=`` for exact accounting.
Dated snapshots (``gpt-4o-2024-08-06``) use the price of their base name."""

SETTINGS = (
    "temperature",
    "max_tokens",
    "top_p",
    "seed",
    "reasoning_effort",
    "max_completion_tokens",
)
"""The ``ModelRequest.settings`` keys passed to the API; other keys are ignored, and a key
whose value is ``None`` is not sent. Reasoning models take ``max_completion_tokens``
(they refuse ``max_tokens``) and ``reasoning_effort``."""

PLACEHOLDER_API_KEY = "not-needed"
"""Sent to a ``base_url`` server when no key is configured (local servers ignore it)."""

_DATED = re.compile(r"-\d{4}-\d{2}-\d{2}$")
_TRANSIENT_STATUSES = frozenset({408, 409, 429})


class OpenAIModel:
    """An OpenAI chat-completions model.

    ``api_key`` defaults to ``OPENAI_API_KEY``; with ``base_url`` (an OpenAI-compatible server)
    and no key, a placeholder key is sent. Alternatively pass a ready ``client`` (its retries
    are turned off; its timeout is kept). Construction makes no network call and raises
    ``ConfigurationError`` when no credentials or endpoint are configured.

    Clients built here are kept one per event loop, because the SDK's pooled connections
    cannot move between loops; a caller-supplied ``client`` is used as is.

    ``continuation`` chooses how ``stream`` continues a cut reply: ``"request"`` (the
    default; any server) asks with ``CONTINUE_PROMPT``, ``"prefix"`` prefills the partial
    reply for servers that support assistant prefill (DeepSeek, Mistral).
    """

    def __init__(
        self,
        model: str = "gpt-4.1-mini",
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: AsyncOpenAI | None = None,
        timeout: float = 60.0,
        prices: Price | None = None,
        continuation: Continuation = "request",
    ) -> None:
        if not model:
            raise ConfigurationError("OpenAIModel needs a model name")
        if continuation not in ("prefix", "request"):
            raise ConfigurationError(
                f"OpenAIModel continuation must be 'prefix' or 'request', not {continuation!r}"
            )
        self._model = model
        self._continuation: Continuation = continuation
        self._prices = prices
        self._shared: AsyncOpenAI | None = None
        self._client_options: dict[str, Any] = {}
        self._clients = PerLoop(lambda: AsyncOpenAI(**self._client_options))
        if client is not None:
            if api_key is not None or base_url is not None:
                raise ConfigurationError(
                    "OpenAIModel takes either client= or api_key=/base_url=, not both"
                )
            self._shared = client.with_options(max_retries=0)
            self._base_url = str(client.base_url)
            return
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            if base_url is None and not os.environ.get("OPENAI_BASE_URL"):
                raise ConfigurationError(
                    f"OpenAIModel({model!r}) has no API key: pass api_key=, set OPENAI_API_KEY, "
                    "or pass base_url= for an OpenAI-compatible server that needs none"
                )
            key = PLACEHOLDER_API_KEY
        self._client_options = {
            "api_key": key,
            "base_url": base_url,
            "timeout": timeout,
            "max_retries": 0,
        }
        first = AsyncOpenAI(**self._client_options)
        self._clients = PerLoop(lambda: AsyncOpenAI(**self._client_options), first)
        self._base_url = str(first.base_url)

    @property
    def name(self) -> str:
        return self._model

    @property
    def provider(self) -> str:
        """What the loop records as the provider of this model's turns."""
        return "openai"

    @property
    def base_url(self) -> str:
        """The API endpoint requests go to."""
        return self._base_url

    @property
    def continues(self) -> bool:
        """True: ``stream`` honours ``ModelRequest.continue_from``."""
        return True

    async def complete(self, request: ModelRequest) -> ModelResponse:
        check_model_endpoint(self._base_url, self._model)  # tests and the demo: local only
        client = self._client()
        tools = [_tool(t) for t in request.tools]
        settings = {k: request.settings[k] for k in SETTINGS if request.settings.get(k) is not None}
        try:
            completion = await client.chat.completions.create(
                model=self._model,
                messages=_messages(request),
                tools=tools or openai.omit,
                parallel_tool_calls=True if tools else openai.omit,
                **settings,
            )
        except openai.OpenAIError as exc:
            raise self._translate(exc) from exc
        return self._response(completion)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream one call. With ``continue_from`` the deltas and ``Completed`` hold only the
        new text (how it is asked for: ``continuation=``)."""
        check_model_endpoint(self._base_url, self._model)
        client = self._client()
        tools = [_tool(t) for t in request.tools]
        settings = {k: request.settings[k] for k in SETTINGS if request.settings.get(k) is not None}
        messages = _messages(request)
        if request.continue_from:
            messages = continued(messages, request.continue_from, self._continuation)
        try:
            chunks = await client.chat.completions.create(
                model=self._model,
                messages=messages,
                tools=tools or openai.omit,
                parallel_tool_calls=True if tools else openai.omit,
                stream=True,
                stream_options={"include_usage": True},
                **settings,
            )
        except openai.OpenAIError as exc:
            raise self._translate(exc) from exc
        assembler = ChunkAssembler()
        async with chunks:  # closes the connection if the consumer stops early
            try:
                async for chunk in chunks:
                    for event in assembler.feed(chunk):
                        yield event
            except openai.OpenAIError as exc:
                # Mid-stream, a failure is a reply cut short: worth asking again.
                error = self._translate(exc)
                if not isinstance(error, TransientModelError):
                    error = TransientModelError(f"{error} (while streaming)")
                raise error from exc
        if not assembler.finished:
            raise TransientModelError(
                f"{self._model} at {self._base_url}: the stream ended before the reply did"
            )
        model = assembler.model or self._model
        usage = self._usage(assembler.input_tokens, assembler.output_tokens, model)
        yield Completed(response=assembler.response(usage, model))

    async def aclose(self) -> None:
        """Close the connections this model opened on the running event loop. Optional: a
        later call opens new ones. A caller-supplied ``client`` is left to its owner."""
        if self._shared is None:
            client = self._clients.pop()
            if client is not None:
                await client.close()

    # -- internals ---------------------------------------------------------------------------

    def _client(self) -> AsyncOpenAI:
        return self._shared if self._shared is not None else self._clients.get()

    def _response(self, completion: ChatCompletion) -> ModelResponse:
        if not completion.choices:
            raise ModelError(f"{self._model}: the response {completion.id!r} has no choices")
        message = completion.choices[0].message
        calls = [
            ToolCall(id=c.id, name=c.function.name, arguments=c.function.arguments)
            if isinstance(c, ChatCompletionMessageFunctionToolCall)
            else ToolCall(id=c.id, name=c.custom.name, arguments=c.custom.input)
            for c in message.tool_calls or []
        ]
        inp = completion.usage.prompt_tokens if completion.usage else 0
        out = completion.usage.completion_tokens if completion.usage else 0
        model = completion.model or self._model
        return ModelResponse(
            text=message.content if message.content is not None else message.refusal,
            tool_calls=calls,
            usage=self._usage(inp, out, model),
            model=model,
        )

    def _usage(self, inp: int, out: int, model: str) -> Usage:
        price = self._prices or _price(self._model) or _price(model)
        return Usage(
            input_tokens=inp, output_tokens=out, cost_usd=price.cost(inp, out) if price else 0.0
        )

    def _translate(self, exc: openai.OpenAIError) -> ModelError:
        where = f"{self._model} at {self._base_url}"
        if isinstance(exc, openai.APITimeoutError):
            return TransientModelError(f"{where}: request timed out")
        if isinstance(exc, openai.APIConnectionError):
            cause = f" ({exc.__cause__})" if exc.__cause__ else ""
            return TransientModelError(f"{where}: connection failed{cause}")
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            details = [f"code {exc.code}"] if exc.code else []
            wait = retry_after(exc.response.headers)
            details += [f"retry-after {wait:g}s"] if wait is not None else []
            details += [f"request id {exc.request_id}"] if exc.request_id else []
            text = f"{where}: HTTP {status}: {_provider_message(exc)}"
            text += f" ({', '.join(details)})" if details else ""
            if exc.code == "insufficient_quota":  # a 429 that waiting does not fix
                return ModelError(text)
            if status in _TRANSIENT_STATUSES or status >= 500:
                return TransientModelError(text, retry_after=wait)
            return ModelError(text)
        return ModelError(f"{where}: {type(exc).__name__}: {exc}")


def _price(model: str) -> Price | None:
    return PRICES.get(model) or PRICES.get(_DATED.sub("", model))


def _provider_message(exc: openai.APIStatusError) -> str:
    """The provider's own ``error.message`` (the SDK unwraps ``{"error": ...}`` into ``body``)."""
    body = exc.body
    if isinstance(body, dict):
        message = body.get("message")
        if isinstance(message, str) and message:
            return message
    if isinstance(body, str) and body:
        return body[:500]
    return exc.message


def _tool(spec: ToolSpec) -> ChatCompletionFunctionToolParam:
    parameters = spec.parameters or {"type": "object", "properties": {}}
    tool: ChatCompletionFunctionToolParam = {
        "type": "function",
        "function": {"name": spec.name, "parameters": parameters},
    }
    if spec.description:
        tool["function"]["description"] = spec.description
    return tool


def _messages(request: ModelRequest) -> list[ChatCompletionMessageParam]:
    out: list[ChatCompletionMessageParam] = []
    if request.instructions:
        out.append({"role": "system", "content": request.instructions})
    out.extend(_message(m) for m in request.messages)
    return out


def _message(m: Message) -> ChatCompletionMessageParam:
    if m.role == "system":
        return {"role": "system", "content": m.content or ""}
    if m.role == "user":
        return {"role": "user", "content": m.content or ""}
    if m.role == "tool":
        if not m.tool_call_id:
            raise ModelError(f"a tool message ({m.name or 'unnamed tool'}) has no tool_call_id")
        return {"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content or ""}
    if not m.tool_calls:
        return {"role": "assistant", "content": m.content or ""}
    calls: list[ChatCompletionMessageFunctionToolCallParam] = [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for c in m.tool_calls
    ]
    return {"role": "assistant", "content": m.content, "tool_calls": calls}
