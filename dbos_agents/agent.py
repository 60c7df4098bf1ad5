"""``Agent``: a named set of instructions, tools and limits. Plain data, no database."""

from __future__ import annotations

import math
from collections.abc import Sequence

from .errors import DefinitionError
from .tools import Tool, check_name


class Agent:
    """An agent definition.

    ``max_turns`` bounds model calls per run (one user message); ``budget_tokens`` and
    ``budget_usd`` bound what one run may spend. When a limit is reached the run stops with
    status ``max_turns`` or ``budget_exhausted`` after the tools of the last turn have run,
    so every requested tool call still gets exactly one result.
    """

    def __init__(
        self,
        name: str,
        instructions: str = "",
        *,
        tools: Sequence[Tool] = (),
        max_turns: int = 20,
        budget_tokens: int | None = None,
        budget_usd: float | None = None,
        model_settings: dict[str, object] | None = None,
    ) -> None:
        problems = check_name("agent", name)
        if not isinstance(instructions, str):
            problems.append("instructions must be a string")
        seen: set[str] = set()
        for t in tools:
            if not isinstance(t, Tool):
                problems.append(f"tools: {t!r} is not a Tool (decorate it with @tool)")
                continue
            if t.name in seen:
                problems.append(f"tools: two tools are named {t.name!r}")
            seen.add(t.name)
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
            problems.append(f"max_turns must be an int >= 1, got {max_turns!r}")
        if budget_tokens is not None and (
            isinstance(budget_tokens, bool)
            or not isinstance(budget_tokens, int)
            or budget_tokens < 1
        ):
            problems.append(f"budget_tokens must be a positive int, got {budget_tokens!r}")
        if budget_usd is not None and (
            isinstance(budget_usd, bool)
            or not isinstance(budget_usd, int | float)
            or not math.isfinite(budget_usd)
            or budget_usd <= 0
        ):
            problems.append(f"budget_usd must be a positive number, got {budget_usd!r}")
        if problems:
            raise DefinitionError(f"agent {name!r}", problems)
        self.name = name
        self.instructions = instructions
        self.tools: dict[str, Tool] = {t.name: t for t in tools}
        self.max_turns = max_turns
        self.budget_tokens = budget_tokens
        self.budget_usd = float(budget_usd) if budget_usd is not None else None
        self.model_settings = dict(model_settings or {})

    def __repr__(self) -> str:
        return f"Agent({self.name!r}, tools={list(self.tools)})"
