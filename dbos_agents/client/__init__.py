"""The clients: what every process that is not a worker uses (scripts, the CLI, the HTTP
server). Importing this package loads no workflow and no worker module."""

from .aio import AsyncAgentClient
from .scope import Scope
from .sync import AgentClient

__all__ = ["AgentClient", "AsyncAgentClient", "Scope"]
