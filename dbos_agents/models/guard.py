"""A guard that keeps tests and the demo from calling a real (paid, remote) model API.

Switched on with ``block_real_models()`` — our test suite does it through the pytest plugin
``dbos_agents.testing.pytest_plugin``, and ``dbos-agents demo`` does it itself. While it is
on, ``OpenAIModel`` refuses to send a request to any endpoint that is not on this machine
(``localhost``, ``127.0.0.0/8``, ``::1``): the fake OpenAI server and local model servers
still work. The refusal is a ``ModelError`` (not retried) that says how to allow it:
``DBOS_AGENTS_ALLOW_REAL_MODELS=1`` in the environment, or ``allow_real_models()`` around
the code that means it.

The state lives in the environment (``DBOS_AGENTS_BLOCK_REAL_MODELS``) rather than in a
variable, so the worker subprocesses a test or the demo starts inherit it. This module
imports nothing beyond the standard library and ``dbos_agents.errors`` (it lives with the
models, which consult it, so an adapter never imports ``dbos_agents.testing``).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

from ..errors import ModelError

BLOCK_ENV = "DBOS_AGENTS_BLOCK_REAL_MODELS"
ALLOW_ENV = "DBOS_AGENTS_ALLOW_REAL_MODELS"
_ON = ("1", "true", "yes")


def block_real_models() -> None:
    """Refuse model requests to remote endpoints from now on, in this process and the
    processes it starts (unless ``DBOS_AGENTS_ALLOW_REAL_MODELS=1``)."""
    os.environ[BLOCK_ENV] = "1"


@contextmanager
def allow_real_models() -> Iterator[None]:
    """Let remote model requests through inside the block (a test that means to call one)."""
    before = os.environ.get(ALLOW_ENV)
    os.environ[ALLOW_ENV] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ALLOW_ENV, None)
        else:
            os.environ[ALLOW_ENV] = before


def real_models_blocked() -> bool:
    """Whether the guard is on and not overridden."""
    blocked = os.environ.get(BLOCK_ENV, "").lower() in _ON
    return blocked and os.environ.get(ALLOW_ENV, "").lower() not in _ON


def is_local(url: str) -> bool:
    """Whether ``url`` points at this machine (by name or loopback address; no DNS)."""
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_model_endpoint(url: str, model: str) -> None:
    """Raise ``ModelError`` when the guard is on and ``url`` is not on this machine."""
    if real_models_blocked() and not is_local(url):
        raise ModelError(
            f"refusing to call {model} at {url}: real model requests are blocked here (tests"
            f" and the demo); set {ALLOW_ENV}=1 to allow them, or use ScriptedModel or a local"
            " OpenAI-compatible server"
        )
