"""Which dbos releases the fast paths were reviewed against, checked at launch.

The fast paths replace DBOS internals (``internals``, ``replay``, ``recv``, ``send``,
``starts``, ``recovery``, ``parking``); a release nobody read may have moved what they
rely on. So a worker or client with fast paths refuses any other release, naming the
range; with ``dbos_fast_paths=False`` it runs on DBOS's public API and only warns.
"""

from __future__ import annotations

import logging
from importlib.metadata import version

from ..errors import UnsupportedDBOSError

log = logging.getLogger("dbos_agents")

REVIEWED = ">=3.4,<3.5"
"""The reviewed range, as ``pyproject.toml`` pins it."""
_REVIEWED_MINORS = frozenset({(3, 4)})


def installed() -> str:
    return version("dbos")


def is_reviewed(release: str) -> bool:
    """Whether ``release`` (``X.Y.Z``, any suffix) lies in ``REVIEWED``."""
    parts = release.split(".")
    try:
        major, minor = int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or "-1")
    except (IndexError, ValueError):
        return False
    return (major, minor) in _REVIEWED_MINORS


def check(*, fast_paths: bool, release: str | None = None) -> None:
    """Refuse an unreviewed dbos release when fast paths are on (``UnsupportedDBOSError``);
    with them off, log a warning and go on."""
    release = release or installed()
    if is_reviewed(release):
        return
    if fast_paths:
        raise UnsupportedDBOSError(
            f"dbos {release} is installed, but dbos-agents' fast paths were reviewed only for"
            f" dbos{REVIEWED}: install a reviewed release (pip install 'dbos{REVIEWED}'), or"
            " set DBOS_AGENTS_DBOS_FAST_PATHS=false to run on DBOS's public API only"
        )
    log.warning(
        "dbos %s is outside the reviewed range %s; running on its public API only",
        release,
        REVIEWED,
        extra={"event": "dbos_unreviewed", "dbos": release},
    )
