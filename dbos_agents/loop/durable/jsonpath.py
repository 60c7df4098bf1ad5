"""What a durable tool records must be JSON: checked where the body hands it over, so the
error points at the call and names the place (``$.pages[3].title``)."""

from __future__ import annotations

import math
from typing import Any

from ...errors import NotJSONError


def check_json(value: Any, what: str, path: str = "$") -> None:
    """Raise ``NotJSONError`` at the first value JSON cannot hold (a NaN, a set, an object)."""
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NotJSONError(what, path, f"{value} is not a finite number")
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise NotJSONError(what, path, f"key {k!r} is not a string")
            check_json(v, what, f"{path}.{k}")
        return
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            check_json(v, what, f"{path}[{i}]")
        return
    raise NotJSONError(what, path, f"a {type(value).__name__} is not JSON")
