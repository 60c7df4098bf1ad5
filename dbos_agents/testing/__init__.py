"""Test helpers shared by the test suite and by users testing their own agents.

- ``CrashHarness``: SIGKILL a real worker at a named crash point, restart it, inspect.
- ``Witness``: an out-of-process event log for counting side effects across crashes.
- ``provision_test_database``: Postgres from an env URL, testcontainers or embedded pgserver.
- ``block_real_models`` / ``allow_real_models`` (``dbos_agents.models.guard``): tests and
  the demo never call a paid model API by accident.

Names load on first use, so importing this package imports neither dbos nor a database
driver.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..loop.crashpoints import CRASH_POINTS, INNER_STEP_POINTS
    from ..models.guard import allow_real_models, block_real_models
    from .cluster import PrivateCluster
    from .crash import CrashHarness, DrillResult, WorkerProcess
    from .database import (
        ProvisionedDatabase,
        create_fresh_database,
        drop_database,
        provision_test_database,
    )
    from .witness import Witness

_LAZY = {
    "CRASH_POINTS": "..loop.crashpoints",
    "INNER_STEP_POINTS": "..loop.crashpoints",
    "CrashHarness": ".crash",
    "DrillResult": ".crash",
    "PrivateCluster": ".cluster",
    "ProvisionedDatabase": ".database",
    "Witness": ".witness",
    "WorkerProcess": ".crash",
    "allow_real_models": "..models.guard",
    "block_real_models": "..models.guard",
    "create_fresh_database": ".database",
    "drop_database": ".database",
    "provision_test_database": ".database",
}

__all__ = [
    "CRASH_POINTS",
    "INNER_STEP_POINTS",
    "CrashHarness",
    "DrillResult",
    "PrivateCluster",
    "ProvisionedDatabase",
    "Witness",
    "WorkerProcess",
    "allow_real_models",
    "block_real_models",
    "create_fresh_database",
    "drop_database",
    "provision_test_database",
]


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
