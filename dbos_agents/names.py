"""Tool and agent names: what the model may call, checked once at definition time."""

from __future__ import annotations

import re

NAME_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
RESERVED_PREFIXES = ("subagent__", "client__")


def check_name(kind: str, name: str) -> list[str]:
    """Problems with a tool or agent name (empty when it is fine)."""
    problems = []
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        problems.append(
            f"{kind} name {name!r} must match {NAME_PATTERN.pattern} "
            "(a letter, then up to 63 letters, digits, '_' or '-')"
        )
    elif name.startswith(RESERVED_PREFIXES):
        problems.append(
            f"{kind} name {name!r} uses a reserved prefix ({', '.join(RESERVED_PREFIXES)})"
        )
    return problems
