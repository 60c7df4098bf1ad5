"""A model named by a string (``"anthropic:claude-haiku-4-5"``), resolved once, where the
agent or the runtime is defined: an unknown provider or a missing extra is a
``DefinitionError`` then, not a failed run later.

``openai`` and ``anthropic`` get our own adapters; any other provider goes through the
Pydantic AI bridge (``PydanticAIModel``) when ``pydantic-ai-slim`` is installed, which
knows the provider or says it does not."""

from __future__ import annotations

import importlib
import importlib.util

from ..errors import ConfigurationError, DefinitionError
from .base import Model

PROVIDERS: dict[str, tuple[str, str, str | None]] = {
    "openai": ("openai", "OpenAIModel", None),  # a core dependency
    "anthropic": ("anthropic", "AnthropicModel", "anthropic"),
}
"""provider -> (adapter module, class, the extra that installs its SDK)."""


def model_from(spec: Model | str) -> Model:
    """``spec`` itself, or the adapter a ``"provider:model"`` string names (built with its
    defaults: the API key from the provider's environment variable)."""
    if not isinstance(spec, str):
        return spec
    provider, sep, name = spec.partition(":")
    if not sep or not name or not provider:
        raise DefinitionError(
            f"model {spec!r}",
            ["write it as 'provider:model', e.g. 'openai:gpt-4.1-mini' or"
             " 'anthropic:claude-haiku-4-5', or pass a Model"],
        )  # fmt: skip
    if provider not in PROVIDERS:
        return _bridged(spec)
    module, cls, extra = PROVIDERS[provider]
    if importlib.util.find_spec(module) is None:
        hint = f"pip install 'dbos-agents[{extra}]'" if extra else f"pip install {module}"
        raise DefinitionError(f"model {spec!r}", [f"the {module} SDK is not installed: {hint}"])
    adapter = getattr(importlib.import_module(f"dbos_agents.models.{module}"), cls)
    built: Model = adapter(name)
    return built


def _bridged(spec: str) -> Model:
    """Another provider's model through Pydantic AI's classes."""
    if importlib.util.find_spec("pydantic_ai") is None:
        known = ", ".join(sorted(PROVIDERS))
        raise DefinitionError(
            f"model {spec!r}",
            [f"{spec.partition(':')[0]!r} is not one of ours ({known}); other providers go"
             " through Pydantic AI: pip install 'dbos-agents[pydantic-ai]' and the"
             " provider's extra (e.g. 'pydantic-ai-slim[google]')"],
        )  # fmt: skip
    from .bridge import PydanticAIModel

    try:
        return PydanticAIModel(spec)
    except ConfigurationError as exc:
        raise DefinitionError(f"model {spec!r}", [str(exc)]) from exc
