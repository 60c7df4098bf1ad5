"""Per-turn rows of a bench/all.py run (ours and the peers), their ratios and plots."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def require_matplotlib() -> None:
    """Fail before minutes of benchmarking, not after, when the plots cannot be drawn."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        sys.exit(
            "bench/all.py needs matplotlib for the plots, which is not a dependency of"
            " dbos-agents itself.\nInstall the bench extra:  pip install -e '.[bench]'"
        )


@dataclass(frozen=True)
class TurnRow:
    system: str
    source: str  # which process measured it: "turn_overhead" or "peers"
    median: float
    p90: float
    samples: list[float]  # per-session ms/turn; empty for the peers (they report summaries)
    floor: bool
    rounds_ms: list[float]  # each round's median (one entry when not run in rounds)


def turn_rows(results: dict[str, Any]) -> list[TurnRow]:
    rows = [
        TurnRow(
            r["system"],
            "turn_overhead",
            r["ms_per_turn_median"],
            r["ms_per_turn_p90"],
            r["samples_ms_per_turn"],
            r["floor"],
            r.get("rounds_ms", [r["ms_per_turn_median"]]),
        )
        for r in results["turn_overhead"]["rows"]
    ]
    rows += [
        TurnRow(
            r["system"],
            "peers",
            r["ms_per_turn_median"],
            r["ms_per_turn_p90"],
            [],
            r["floor"],
            r.get("rounds_ms", [r["ms_per_turn_median"]]),
        )
        for r in results["peers"]
    ]
    return sorted(rows, key=lambda r: r.median)


def floor_of(rows: list[TurnRow], source: str) -> float | None:
    return next((r.median for r in rows if r.floor and r.source == source), None)


def ratio(x: float, floor: float | None) -> str:
    return f"{x / floor:.2f}" if floor else "-"


def plot_turns(rows: list[TurnRow], floors: dict[str, float | None], path: Path) -> None:
    """Bars at the median, a whisker to p90, and our per-session samples as dots."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"turn_overhead": "tab:blue", "peers": "tab:orange"}
    fig, ax = plt.subplots(figsize=(9, 0.55 * len(rows) + 1.8))
    ys = list(range(len(rows)))
    ax.barh(
        ys,
        [r.median for r in rows],
        xerr=[[0.0] * len(rows), [max(0.0, r.p90 - r.median) for r in rows]],
        color=[colors[r.source] for r in rows],
        alpha=0.75,
        capsize=3,
    )
    for y, r in zip(ys, rows, strict=True):
        if r.samples:
            ax.scatter(r.samples, [y] * len(r.samples), s=9, color="black", alpha=0.5, zorder=3)
    for (source, floor), style in zip(floors.items(), ("--", ":"), strict=False):
        if floor:
            ax.axvline(floor, color=colors[source], ls=style, lw=1, label=f"floor ({source})")
    ax.set_yticks(ys, [f"{r.system}  [{r.source}]" for r in rows], fontsize=8)
    ax.set_xlabel("ms per turn (bar: median, whisker: p90, dots: per-session samples)")
    ax.set_title("ms per turn, same scripted conversation, same run")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_submit(samples: dict[str, list[float]], path: Path) -> None:
    """Histogram (log bins) and CDF of submit -> resume next to the raw recv/send floor."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, (hist, cdf) = plt.subplots(1, 2, figsize=(11, 4))
    every = [x for xs in samples.values() for x in xs if x > 0] or [1.0]
    lo, hi = max(0.1, min(every)), max(every)
    bins = np.geomspace(lo, hi * 1.01, 40)
    for label, xs in samples.items():
        pos = sorted(x for x in xs if x > 0)  # log axis; clock skew could make one <= 0
        if not pos:
            continue
        hist.hist(pos, bins=bins, alpha=0.5, label=label)
        fractions = [0.0] + [(i + 1) / len(pos) for i in range(len(pos))]
        cdf.step([pos[0], *pos], fractions, where="post", label=label)
    for ax in (hist, cdf):
        ax.set_xscale("log")
        ax.set_xlabel("ms after the submit (log scale)")
    hist.set_ylabel("samples")
    cdf.set_ylabel("fraction of samples")
    cdf.set_ylim(0, 1.02)
    cdf.axhline(0.5, color="grey", lw=0.5)
    cdf.axhline(0.99, color="grey", lw=0.5)
    hist.legend(fontsize=7)
    fig.suptitle("client-tool submit -> resume (sequential), with the raw-DBOS floor")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
