"""A pytest plugin that switches on the real-model guard for the whole session.

Enable it in a ``conftest.py`` with ``pytest_plugins = ["dbos_agents.testing.pytest_plugin"]``
(or ``-p dbos_agents.testing.pytest_plugin``). Tests that mean to call a real model wrap the
call in ``dbos_agents.testing.allow_real_models()`` or run with
``DBOS_AGENTS_ALLOW_REAL_MODELS=1``.
"""

from __future__ import annotations

import pytest

from ..models.guard import block_real_models


def pytest_configure(config: pytest.Config) -> None:
    block_real_models()
