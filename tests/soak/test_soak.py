"""The soak of issue 7: two workers, a private Postgres, mixed sessions, chaos, invariants.

    python -m pytest tests/soak -s                 # short: ~20 kills, 2 SIGTERMs, 1 restart
    python -m pytest tests/soak -m soak -s         # full: 200 kills, 20 SIGTERMs, 3 restarts, 1 outage

The summary line is printed (visible with -s) and written to ``summary.txt`` in the run
directory (``.dbos_agents/soak/<test>-<time>/``, or ``$SOAK_DIR``), next to ``report.txt``
(violations, the offending sessions' rows, worker log excerpts, the chaos timeline), the
witness file and every worker log.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dbos_agents.testing import PrivateCluster

from .chaos import FULL, SHORT, Soak, SoakConfig


def _soak(cfg: SoakConfig, cluster: PrivateCluster, run_dir: Path) -> None:
    report = Soak(cfg.scaled(), run_dir, cluster).run()
    sys.stderr.write(f"\n{report.summary}\n(report: {run_dir / 'report.txt'})\n")
    sys.stderr.flush()
    assert report.ok, (
        f"{report.summary}\nfull report: {run_dir / 'report.txt'}\n\n{report.diagnosis[:20000]}"
    )


@pytest.mark.integration
@pytest.mark.crash
@pytest.mark.timeout(900)
def test_soak_short(private_cluster: PrivateCluster, soak_dir: Path) -> None:
    _soak(SHORT, private_cluster, soak_dir)


@pytest.mark.soak
@pytest.mark.timeout(4 * 3600)
def test_soak_full(private_cluster: PrivateCluster, soak_dir: Path) -> None:
    _soak(FULL, private_cluster, soak_dir)
