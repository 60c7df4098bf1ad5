"""Model adapters and the protocol they implement."""

from .base import Model, ModelRequest, ToolSpec
from .scripted import ScriptedModel, call, calls

__all__ = ["Model", "ModelRequest", "ScriptedModel", "ToolSpec", "call", "calls"]
