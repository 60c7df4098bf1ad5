"""Load ``package.module:attr`` specs given on the command line or in settings.

The current folder is importable, as with ``python -m``, uvicorn and celery: a newcomer's
``myagent.py`` loads as ``--app myagent:runtime`` without ``PYTHONPATH=.``. The console
script alone would not find it, since its ``sys.path[0]`` is the script's own folder.
"""

from __future__ import annotations

import importlib
import os
import sys

from .errors import ConfigurationError


def import_object(spec: str, what: str) -> object:
    """The object named by ``spec``; ``ConfigurationError`` naming ``what`` when it fails."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ConfigurationError(f"{what} must look like 'package.module:attr', got {spec!r}")
    current_folder_importable()
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigurationError(f"cannot load {spec!r} ({what}): {exc}") from exc


def current_folder_importable() -> None:
    """Put the current folder first on ``sys.path`` unless it is there already (as ``''``
    or as its path), which is where ``python -m`` and uvicorn's ``--app-dir .`` put it."""
    cwd = os.getcwd()
    if any(os.path.abspath(entry or os.curdir) == cwd for entry in sys.path):
        return
    sys.path.insert(0, cwd)
    importlib.invalidate_caches()
