"""The wait a provider asks for before the next request, from its response headers.

Both adapters read it onto ``TransientModelError.retry_after``, which the model turn
honours (``loop/respond.py``). OpenAI sends ``retry-after-ms`` beside ``retry-after``;
Anthropic sends ``retry-after`` in seconds. An HTTP-date is not read: providers send
seconds, and a date is only as good as two clocks' agreement. A value that does not parse
is no wait asked for, never an error on top of the provider's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

__all__ = ["retry_after"]


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait: ``retry-after-ms`` (finer) if it parses, else ``retry-after``;
    ``None`` when neither is a finite number of at least zero."""
    ms = _number(headers.get("retry-after-ms"))
    if ms is not None:
        return ms / 1000
    return _number(headers.get("retry-after"))


def _number(value: str | None) -> float | None:
    if not value:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None
