"""Tables: rich ones for a script's console report, markdown ones for docs/benchmarks.md."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from rich.table import Table


def rich_table(title: str, columns: Sequence[str], left: Collection[str] | None = None) -> Table:
    """A table whose ``left`` columns (default: the first) are left-aligned, the rest
    right-aligned (numbers)."""
    left = {columns[0]} if left is None else left
    t = Table(title=title)
    for col in columns:
        t.add_column(col, justify="left" if col in left else "right")
    return t


def md_table(header: Sequence[str], body: Sequence[Sequence[str]], right_from: int = 1) -> str:
    """A markdown table; columns from ``right_from`` on are right-aligned."""
    align = ["---" if i < right_from else "---:" for i in range(len(header))]
    return "\n".join("| " + " | ".join(r) + " |" for r in [header, align, *body])


def ratio(ours: float | None, floor: float | None) -> str:
    """ours / floor as ``2.5x``, ``-`` when either is missing."""
    return "-" if ours is None or not floor else f"{ours / floor:.1f}x"
