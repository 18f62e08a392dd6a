"""The ``icectl`` entry point: every package's verbs in one command line.

It sits above every folder (like ``bench.py``): the controller's verbs come from
``icefabric.control.cli``, ``icectl experiment`` from ``icefabric.experiment.cli`` and
``icectl sim`` from ``icefabric.sim.cli``, so the controller never imports the packages that
use it. Every verb module has one ``register(verbs)`` function
(:class:`~icefabric.control.cli.common.Verbs`); this list is their order in ``icectl --help``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from icefabric.control.cli import agents, ccl, daemon, links, ops, plan, shell, telemetry, topo
from icefabric.control.cli.app import build_parser as _build_parser
from icefabric.control.cli.app import run
from icefabric.control.cli.common import Register
from icefabric.experiment import cli as experiment
from icefabric.sim import cli as sim

VERBS: tuple[Register, ...] = (
    topo.register,
    plan.register,
    experiment.register,
    ccl.register,
    sim.register,
    daemon.register,
    links.register,
    shell.register,
    agents.register,
    telemetry.register,
    ops.register,
)


def build_parser() -> argparse.ArgumentParser:
    """The icectl argument parser (every verb)."""
    return _build_parser(VERBS)


def main(argv: Sequence[str] | None = None) -> int:
    """Run icectl; returns the exit code."""
    return run(VERBS, argv)
