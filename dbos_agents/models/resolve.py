"""A model named by a string (``"anthropic:claude-haiku-4-5"``), resolved once, where the
agent or the runtime is defined: an unknown provider or a missing extra is a
``DefinitionError`` then, not a failed run later."""

from __future__ import annotations

import importlib
import importlib.util

from ..errors import DefinitionError
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
        known = ", ".join(sorted(PROVIDERS))
        raise DefinitionError(
            f"model {spec!r}", [f"unknown provider {provider!r} (known: {known})"]
        )
    module, cls, extra = PROVIDERS[provider]
    if importlib.util.find_spec(module) is None:
        hint = f"pip install 'dbos-agents[{extra}]'" if extra else f"pip install {module}"
        raise DefinitionError(f"model {spec!r}", [f"the {module} SDK is not installed: {hint}"])
    adapter = getattr(importlib.import_module(f"dbos_agents.models.{module}"), cls)
    built: Model = adapter(name)
    return built
