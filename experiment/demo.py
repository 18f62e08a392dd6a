"""``make demo``: ICE against ECMP + DCQCN, timed, then a link failure, in one process, no root.

1. **Timed comparison** (virtual time, deterministic): the default experiment preset
   (``ecmp-collides``: 4 leaves x 2 spines, 8 hosts, ring all-reduce over 2 channels) runs
   under ECMP + DCQCN and then under ICE (planned paths, INT-driven senders, controller caps) on
   embedded switches running ``p4src/ice.p4``, the controller installing everything over
   P4Runtime; collective bandwidth comes from the measured completion times. The comparison is
   printed and written to ``results/<preset>-<time>/results.json`` and ``comparison.png``.
2. **Link failure** (real time, :mod:`icefabric.experiment.linkdemo`): the same fabric as
   in-process embedded switches with their own schedulers; the controller plans the ring and every flow sends
   a short RoCEv2 burst; a leaf-spine wire is cut without telling the controller: its LLDP link
   probes stop arriving, the controller declares the link down, replans the flows that crossed it
   and installs the new paths (times measured), the traffic runs again and must avoid the cut;
   the wire is healed and the probes restore the link.

Exit status 0 only when every step worked.
"""

from __future__ import annotations

import argparse
import functools
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from icefabric.control import render
from icefabric.control.cli.common import int_range
from icefabric.experiment.linkdemo import link_failure
from icefabric.experiment.results import mode_paths

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TOPO = ROOT / "topo" / "examples" / "leaf_spine_2x4.yaml"


def timed_comparison(
    preset: str, out_base: Path, con: Console, failures: list[str]
) -> dict[str, Any] | None:
    """Step 1: the preset's modes in virtual time; prints and writes the comparison."""
    from icefabric.experiment.presets import load_preset
    from icefabric.experiment.report import comparison_table, run_with_progress

    exp = load_preset(preset)
    ph = exp.job.phases[0]
    con.print(
        f"[bold]1. timed comparison[/bold] (virtual time): preset {exp.name}: "
        f"{exp.topology.name} ({len(exp.topology.switches)} embedded switches running ice.p4, "
        f"{len(exp.topology.hosts)} hosts), {ph.collective} {ph.algorithm} over "
        f"{len(exp.job.ranks)} ranks, {ph.channels} channels, "
        f"{render.human_bytes(ph.message_bytes)}; links at {exp.rates.scale:g} x their rates"
    )
    outcome = run_with_progress(exp, con, out_base=out_base, label="  {mode}")
    doc = outcome.doc
    con.print(comparison_table(doc))
    for m in doc["modes"]:
        if not m["ok"]:
            failures.append(f"{m['mode']}: {m['error']}")
            con.print(f"[red]FAILED[/red] {m['mode']}: {m['error']}")
        elif m["drops"] or m["psn_losses"]:
            failures.append(f"{m['mode']}: {m['drops']} drops, {m['psn_losses']} lost packets")
        model = m["engine"].get("ecmp_model")
        if model is not None:
            on = model["links_checked"] - len(model["links_off"])
            con.print(
                f"  {model['model']} (control/planner/ecmp.py), for the agents' real keys: "
                f"{on}/{model['links_checked']} fabric links carry the bytes it predicts"
                + (
                    f", {model['match']}/{model['flows_checked']} flows on the predicted path"
                    if model["flows_checked"]
                    else ""
                )
            )
            if model["differ"] or model["links_off"]:
                failures.append(
                    f"{m['mode']}: off the ECMP model: {model['differ']} flow(s), links "
                    + (", ".join(model["links_off"]) or "none")
                )
    if outcome.directory is not None:
        con.print(
            f"  results: {outcome.directory}/results.json, {outcome.directory}/comparison.png"
        )
    return doc


def run(
    topo_path: Path,
    *,
    packets: int,
    channels: int,
    con: Console,
    link_pps: int | None,
    probe_interval_ms: float = 100.0,
    probe_misses: int = 3,
    preset: str = "ecmp-collides",
    out_base: Path = Path("results"),
    timed: bool = True,
) -> int:
    """The whole demo; returns the exit code."""
    t_start = time.perf_counter()
    failures: list[str] = []
    doc = timed_comparison(preset, out_base, con, failures) if timed else None
    lines = link_failure(
        topo_path,
        packets=packets,
        channels=channels,
        con=con,
        link_pps=link_pps,
        failures=failures,
        probe_interval_ms=probe_interval_ms,
        probe_misses=probe_misses,
        before_cut=None if doc is None else functools.partial(_path_table, con, doc),
    )
    con.print("")
    con.print("[bold]summary[/bold]")
    if doc is not None:
        _summary_timed(con, doc)
    for line in lines:
        con.print(line)
    total = time.perf_counter() - t_start
    if failures:
        con.print(f"[red bold]demo FAILED[/red bold] ({len(failures)} check(s)) in {total:.1f} s")
        return 1
    con.print(f"[green bold]demo OK[/green bold] in {total:.1f} s")
    return 0


def _path_table(con: Console, doc: dict[str, Any]) -> None:
    """Paths each flow took in the timed run, ICE's plan against ECMP's hash."""
    by = {m["mode"]: m for m in doc["modes"]}
    if "ice" not in by or "ecmp+dcqcn" not in by:
        return
    ice, ice_from = mode_paths(by["ice"])
    ecmp, ecmp_from = mode_paths(by["ecmp+dcqcn"])
    flows = sorted(set(ice) & set(ecmp))
    moved = [f for f in flows if ice[f] != ecmp[f]]
    con.print(
        render.table(
            f"paths in the timed run (ICE: {ice_from}; ECMP: {ecmp_from}): the {len(moved)} of "
            f"{len(flows)} flows ECMP's hash put off ICE's plan",
            ["flow", "ICE took (planned)", "ECMP took"],
            [(f.split("/", 2)[-1], " > ".join(ice[f]), " > ".join(ecmp[f])) for f in moved],
        )
    )


def _summary_timed(con: Console, doc: dict[str, Any]) -> None:
    by = {m["mode"]: m for m in doc["modes"]}
    scale = float(doc["experiment"]["rates"]["scale"])
    for m in doc["modes"]:
        if m["ok"]:
            con.print(
                f"  {m['mode']:<11}: busbw {m['busbw_gbps'] / scale:.1f} Gbit/s "
                f"({m['busbw_over_bound'] * 100:.1f} % of the non-blocking bound "
                f"{m['bound_busbw_gbps'] / scale:.1f}), completion {m['completion_us'] / 1e3:.1f} ms "
                f"virtual, busiest link {m['max_link_utilisation'] * 100:.0f} %, queue p99 "
                f"{m['queue_packets']['p99']} packets, {m['ecn_marks']} ECN marks"
            )
    ice, base = by.get("ice"), by.get("ecmp+dcqcn")
    if ice and base and ice["ok"] and base["ok"]:
        speed = ice["busbw_gbps"] / base["busbw_gbps"]
        con.print(
            f"  ICE / ECMP+DCQCN = {speed:.2f}x (goal >= 1.3x: {'met' if speed >= 1.3 else 'NOT met'}); "
            f"ICE at {ice['busbw_over_bound'] * 100:.1f} % of the bound (goal >= 90 %: "
            f"{'met' if ice['busbw_over_bound'] >= 0.9 else 'NOT met'})"
        )


def _positive_ms(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected milliseconds, got {text!r}") from None
    if not 0 < value <= 60_000:
        raise argparse.ArgumentTypeError(f"expected > 0 and <= 60000 ms, got {text!r}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m icefabric.experiment.demo``."""
    p = argparse.ArgumentParser(
        prog="python -m icefabric.experiment.demo", description=__doc__.split("\n")[0]
    )
    p.add_argument("--topo", type=Path, default=DEFAULT_TOPO, help="leaf-spine topology spec")
    p.add_argument(
        "--preset", default="ecmp-collides", help="experiment preset of the timed comparison"
    )
    p.add_argument(
        "--out", type=Path, default=Path("results"), help="results base directory (results/)"
    )
    p.add_argument(
        "--no-timed", action="store_true", help="skip the timed comparison (failure step only)"
    )
    p.add_argument(
        "--packets",
        type=int_range(1, 10_000),
        default=4,
        help="packets per flow per round of the failure step (1..10000)",
    )
    p.add_argument(
        "--channels", type=int_range(1, 64), default=2, help="ring channels of the job (1..64)"
    )
    p.add_argument(
        "--link-pps",
        type=int_range(0),
        default=200,
        help="drain rate of switch-to-switch ports in packets/s, so queues build (0: unlimited)",
    )
    p.add_argument(
        "--probe-interval",
        type=_positive_ms,
        default=100.0,
        metavar="MS",
        help="LLDP link probe interval in ms (as icectl run; must be > 0: the failure step "
        "relies on the probes)",
    )
    p.add_argument(
        "--probe-misses",
        type=int_range(1),
        default=3,
        metavar="N",
        help="missed intervals -> link down",
    )
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="log the controller's steps (and a failure's traceback)",
    )
    args = p.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.ERROR,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    from icefabric.experiment.presets import load_preset
    from icefabric.topo.spec import SpecError, load_topology

    try:  # bad input is a one-line error (exit 2) before anything runs
        load_topology(args.topo)
        if not args.no_timed:
            load_preset(args.preset)
    except SpecError as exc:
        print(f"{p.prog}: error: {exc}", file=sys.stderr)
        return 2
    con = render.console()
    try:
        return run(
            args.topo,
            packets=args.packets,
            channels=args.channels,
            con=con,
            link_pps=args.link_pps or None,
            probe_interval_ms=args.probe_interval,
            probe_misses=args.probe_misses,
            preset=args.preset,
            out_base=args.out,
            timed=not args.no_timed,
        )
    except Exception as exc:
        if args.verbose:
            log.exception("demo failed")
        con.print(f"[red bold]demo FAILED[/red bold]: {type(exc).__name__}: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
