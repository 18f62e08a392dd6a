"""icectl experiment run|list|show: timed ICE vs ECMP + DCQCN experiments."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from icefabric.control import render
from icefabric.control.cli_common import EXIT_OK, EXIT_USAGE, CliError

DEFAULT_OUT = Path("results")


def add_experiment_parser(sub: Any, add_json: Callable[[argparse.ArgumentParser], None]) -> None:
    """The ``experiment`` subcommand and its verbs."""
    exp = sub.add_parser(
        "experiment", help="timed experiments: collective busbw under ICE and ECMP + DCQCN"
    )
    esub = exp.add_subparsers(dest="experiment_command", metavar="SUBCOMMAND")
    esub.required = True
    ls = esub.add_parser("list", help="the built-in presets")
    add_json(ls)
    ls.set_defaults(func=cmd_experiment_list)
    show = esub.add_parser("show", help="print a results directory's comparison")
    show.add_argument("dir", metavar="DIR", help="results/<name>-<time>/ (or its results.json)")
    add_json(show)
    show.set_defaults(func=cmd_experiment_show)


def cmd_experiment_list(args: argparse.Namespace) -> int:
    """icectl experiment list: every preset with its topology, workload and modes."""
    from icefabric.control.experiment.presets import load_preset, preset_names

    rows: list[dict[str, Any]] = []
    for name in preset_names():
        e = load_preset(name)
        ph = e.job.phases[0]
        rows.append(
            {
                "name": name,
                "topology": e.topology.name,
                "hosts": len(e.topology.hosts),
                "workload": f"{ph.collective} {ph.algorithm}".strip()
                + (f" (+{len(e.job.phases) - 1} phases)" if len(e.job.phases) > 1 else ""),
                "ranks": len(e.job.ranks),
                "message": ph.message_bytes,
                "modes": list(e.modes),
                "description": e.description,
            }
        )
    if args.json:
        render.emit_json(rows)
        return EXIT_OK
    render.console().print(
        render.table(
            "experiment presets (icectl experiment run --preset NAME)",
            ["name", "topology", "workload", "ranks", "message", "modes"],
            [
                (
                    r["name"],
                    f"{r['topology']} ({r['hosts']} hosts)",
                    r["workload"],
                    r["ranks"],
                    render.human_bytes(r["message"]),
                    ", ".join(r["modes"]),
                )
                for r in rows
            ],
        )
    )
    return EXIT_OK


def cmd_experiment_show(args: argparse.Namespace) -> int:
    """icectl experiment show: the comparison of a results directory."""
    from icefabric.control.experiment import results
    from icefabric.control.experiment.report import comparison_table, links_table

    try:
        doc = results.load(args.dir)
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc
    if args.json:
        render.emit_json(doc)
        return EXIT_OK
    con = render.console()
    try:
        con.print(comparison_table(doc))
        con.print(links_table(doc))
    except (KeyError, TypeError) as exc:
        raise CliError(
            f"{args.dir}: results.json lacks a field of the schema: {exc}", EXIT_USAGE
        ) from exc
    return EXIT_OK
