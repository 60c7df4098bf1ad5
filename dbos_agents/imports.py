"""Load ``package.module:attr`` specs given on the command line or in settings."""

from __future__ import annotations

import importlib

from .errors import ConfigurationError


def import_object(spec: str, what: str) -> object:
    """The object named by ``spec``; ``ConfigurationError`` naming ``what`` when it fails."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ConfigurationError(f"{what} must look like 'package.module:attr', got {spec!r}")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigurationError(f"cannot load {spec!r} ({what}): {exc}") from exc
