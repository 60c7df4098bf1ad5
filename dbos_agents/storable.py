"""Values on their way into Postgres: refused when a caller sends them, repaired when the
runtime produced them.

Postgres stores no NUL (U+0000) in ``text`` or ``jsonb``, a lone UTF-16 surrogate cannot be
encoded as UTF-8 at all, and ``jsonb`` takes no NaN or Infinity (JSON's ``1e400`` parses to
Infinity). Either would fail the statement. So:

- what a caller submits (a message, an id, a tool result, an error text) is *checked*
  before anything is written, and refused with ``InvalidRequestError`` naming the field;
- what the runtime itself produced (a tool's output, the model's text, an error text) is
  *repaired* where it is written: such characters become U+FFFD and non-finite numbers
  become strings, so a careless tool or model never fails a run or loses a result.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from .errors import InvalidRequestError

REPLACEMENT = "\ufffd"
MAX_ID_CHARS = 256
"""Longest id a caller may send (session, tool call, user, tenant, agent name)."""
MAX_INT = 2**63 - 1
"""Largest integer magnitude accepted from callers: what a JSON peer can hold in 64 bits."""

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")


# ---------------------------------------------------------------- repair (runtime output)


def text(s: str) -> str:
    """``s`` with every NUL and lone surrogate replaced by U+FFFD."""
    return _UNSTORABLE.sub(REPLACEMENT, s) if _UNSTORABLE.search(s) else s


def optional_text(s: str | None) -> str | None:
    return None if s is None else text(s)


def value(obj: Any) -> Any:
    """A JSON-like value with every string repaired (keys too) and every non-finite float
    turned into its name ("NaN", "Infinity", "-Infinity")."""
    if isinstance(obj, str):
        return text(obj)
    if isinstance(obj, float) and not math.isfinite(obj):
        return "NaN" if math.isnan(obj) else ("Infinity" if obj > 0 else "-Infinity")
    if isinstance(obj, dict):
        return {text(str(k)): value(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [value(v) for v in obj]
    return obj


def dumps(obj: Any) -> str:
    """JSON text that ``jsonb`` accepts. The common case costs one ``json.dumps`` and one
    regex scan; only a value that needs repair is walked."""
    try:
        out = json.dumps(obj, ensure_ascii=False, allow_nan=False)
    except ValueError:  # NaN or Infinity somewhere
        return json.dumps(value(obj), ensure_ascii=False, allow_nan=False)
    if "\\u0000" in out or _UNSTORABLE.search(out):
        return json.dumps(value(obj), ensure_ascii=False, allow_nan=False)
    return out


# ---------------------------------------------------------------- refuse (caller input)


def _refuse(field: str, what: str) -> InvalidRequestError:
    return InvalidRequestError(f"{field}: {what}")


def check_text(s: object, field: str) -> str:
    """A caller's free text (a message, an error sentence, a reason)."""
    if not isinstance(s, str):
        raise _refuse(field, f"must be a string, got {type(s).__name__}")
    m = _UNSTORABLE.search(s)
    if m is not None:
        kind = "a NUL character (U+0000)" if m.group() == "\x00" else "a lone surrogate"
        raise _refuse(field, f"contains {kind}, which cannot be stored")
    return s


def check_id(s: object, field: str) -> str:
    """A caller's identifier: 1 to ``MAX_ID_CHARS`` characters, no control characters."""
    if not isinstance(s, str):
        raise _refuse(field, f"must be a string, got {type(s).__name__}")
    if not s or len(s) > MAX_ID_CHARS:
        raise _refuse(field, f"must be 1 to {MAX_ID_CHARS} characters long (got {len(s)})")
    if _CONTROL.search(s):
        raise _refuse(field, "contains a control character or a lone surrogate")
    return s


def check_optional_id(s: object, field: str) -> str | None:
    return None if s is None else check_id(s, field)


def check_value(obj: Any, field: str) -> None:
    """A caller's JSON value (a tool result): every string storable, every number finite
    and within ``MAX_INT``; the error names the path (``result.items[2].name``)."""
    if isinstance(obj, str):
        check_text(obj, field)
    elif isinstance(obj, bool) or obj is None:
        return
    elif isinstance(obj, float):
        if not math.isfinite(obj):
            raise _refuse(field, f"{obj} is not a finite number (JSON has no NaN or Infinity)")
    elif isinstance(obj, int):
        if abs(obj) > MAX_INT:
            raise _refuse(field, f"integer out of range (more than {MAX_INT} in magnitude)")
    elif isinstance(obj, dict):
        for k, v in obj.items():
            key = check_text(k, f"{field} (a key)") if isinstance(k, str) else str(k)
            check_value(v, f"{field}.{key}")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            check_value(v, f"{field}[{i}]")


def check_int(value: object, what: str, low: int, high: int | None = None) -> int:
    """``value`` if it is an int in the range (``high`` None: no upper bound), else
    ``InvalidRequestError``."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < low
        or (high is not None and value > high)
    ):
        span = f"from {low} to {high}" if high is not None else f">= {low}"
        raise InvalidRequestError(f"{what} must be an int {span}, got {value!r}")
    return value
