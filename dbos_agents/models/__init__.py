"""Model adapters and the protocol they implement.

``OpenAIModel`` and ``Price`` load on first use, so ``openai`` is only needed by those who
use them; ``AnthropicModel`` and ``AnthropicPrice`` likewise (the ``anthropic`` extra), and
``PydanticAIModel`` (the ``pydantic-ai`` extra: every other provider).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import (
    Completed,
    Model,
    ModelEvent,
    ModelRequest,
    StreamingModel,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
)
from .fallback import FallbackModel
from .scripted import ScriptedModel, call, calls

if TYPE_CHECKING:
    from .anthropic import AnthropicModel, AnthropicPrice
    from .bridge import PydanticAIModel
    from .openai import OpenAIModel, Price

__all__ = [
    "AnthropicModel",
    "AnthropicPrice",
    "Completed",
    "FallbackModel",
    "Model",
    "ModelEvent",
    "ModelRequest",
    "StreamingModel",
    "TextDelta",
    "ToolCallDelta",
    "OpenAIModel",
    "Price",
    "PydanticAIModel",
    "ScriptedModel",
    "ToolSpec",
    "call",
    "calls",
]


def __getattr__(name: str) -> object:
    if name in ("OpenAIModel", "Price"):
        from . import openai

        return getattr(openai, name)
    if name in ("AnthropicModel", "AnthropicPrice"):
        from . import anthropic

        return getattr(anthropic, name)
    if name == "PydanticAIModel":
        from .bridge import PydanticAIModel

        return PydanticAIModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
