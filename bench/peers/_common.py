"""Shared argument parsing and result shape for the peer scripts.

Runs under bench/peers/.venv (not the dbos-agents venv), so it imports nothing from
dbos_agents. Each peer script prints one JSON object per measured system on stdout, and
run.py (under the dbos-agents venv) collects those lines; keeping the shape in one place
keeps the peers comparable.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
from importlib.metadata import PackageNotFoundError, version


def parse_args(description: str) -> argparse.Namespace:
    """The flags every peer takes, so run.py can drive them all the same way."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument(
        "--database-url",
        required=True,
        help="postgresql:// URL of a fresh, empty database (run.py creates one per peer)",
    )
    p.add_argument("--sessions", type=int, default=20, help="measured sessions (after 1 warm-up)")
    p.add_argument("--turns", type=int, default=10, help="tool-calling turns before the answer")
    args = p.parse_args()
    if args.sessions < 1 or args.turns < 1:
        p.error("--sessions and --turns must be at least 1")
    return args


def versions(*packages: str) -> dict[str, str]:
    """Installed versions, so a number is never quoted without what produced it."""
    out = {"python": platform.python_version()}
    for name in packages:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "absent"
    return out


def p90(xs: list[float]) -> float:
    """90th percentile (inclusive method), which is defined for a single sample too."""
    if len(xs) == 1:
        return xs[0]
    return statistics.quantiles(xs, n=10, method="inclusive")[-1]


def emit(
    system: str,
    ms_per_turn: list[float],
    *,
    turns: int,
    divisor: int,
    measures: str,
    pkg_versions: dict[str, str],
    floor: bool = False,
) -> None:
    """Print one result line. ``divisor`` is what each session's wall time was divided by."""
    print(
        json.dumps(
            {
                "system": system,
                "ms_per_turn_median": round(statistics.median(ms_per_turn), 3),
                "ms_per_turn_p90": round(p90(ms_per_turn), 3),
                "ms_per_turn_min": round(min(ms_per_turn), 3),
                "sessions": len(ms_per_turn),
                "turns": turns,
                "divisor": divisor,
                "floor": floor,
                "measures": measures,
                "versions": pkg_versions,
            }
        ),
        flush=True,
    )
