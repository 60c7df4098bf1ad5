"""Test helpers shared by the test suite and by users testing their own agents.

- ``CrashHarness``: SIGKILL a real worker at a named crash point, restart it, inspect.
- ``Witness``: an out-of-process event log for counting side effects across crashes.
- ``provision_test_database``: Postgres from an env URL, testcontainers or embedded pgserver.
"""

from ..runtime.crashpoints import CRASH_POINTS
from .cluster import PrivateCluster
from .crash import CrashHarness, DrillResult, WorkerProcess
from .database import (
    ProvisionedDatabase,
    create_fresh_database,
    drop_database,
    provision_test_database,
)
from .witness import Witness

__all__ = [
    "CRASH_POINTS",
    "CrashHarness",
    "DrillResult",
    "PrivateCluster",
    "ProvisionedDatabase",
    "Witness",
    "WorkerProcess",
    "create_fresh_database",
    "drop_database",
    "provision_test_database",
]
