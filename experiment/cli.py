"""icectl experiment run|list|show: timed ICE vs ECMP + DCQCN experiments."""

from __future__ import annotations

import argparse
import math
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from icefabric.control import render
from icefabric.control.cli.common import EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, CliError, Verbs

DEFAULT_OUT = Path("results")


def register(verbs: Verbs) -> None:
    """``icectl experiment run|list|show``."""
    add_json = verbs.add_json
    exp = verbs.add(
        "experiment", help="timed experiments: collective busbw under ICE and ECMP + DCQCN"
    )
    esub = exp.add_subparsers(dest="experiment_command", metavar="SUBCOMMAND")
    esub.required = True
    run = esub.add_parser(
        "run",
        help="run every mode of an experiment (file or --preset), write results/<name>-<time>/",
    )
    run.add_argument("file", metavar="FILE", nargs="?", help="experiment file (YAML/JSON)")
    run.add_argument(
        "--preset", default=None, help="a built-in experiment (icectl experiment list)"
    )
    run.add_argument(
        "--modes", default=None, help="comma-separated modes to run instead of the file's"
    )
    run.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="results base directory (default results/)"
    )
    run.add_argument(
        "--seed", type=int, default=None, help="override the file's seed (the NICs' QPs and ports)"
    )
    run.add_argument(
        "--engine",
        choices=("virtual", "mininet"),
        default=None,
        help="override the file's engine (mininet: real time, needs root)",
    )
    run.add_argument(
        "--target",
        choices=("embedded", "bmv2"),
        default=None,
        help="override the file's switches (mininet engine only): embedded (ice-switch, the "
        "default) or bmv2 (simple_switch_grpc; p4c-bm2-ss compiles ice.p4 into the build "
        "cache, build/bmv2/ or $ICE_BUILD_DIR, when missing or stale; queue rates in packets/s = link bytes/s / (mtu_bytes + 58), "
        "a full RoCEv2 data frame)",
    )
    run.add_argument(
        "--ice",
        default=None,
        metavar="KEY=VALUE,...",
        help="override the file's ice: knobs (anchor, derived_ai, starts: true|false; eta: "
        "number; sample_n: INT and feedback on 1 in N packets, a power of two; sample_gap: and "
        "at least once per this many base RTTs, 0 none; starts: flows no plan covers start at "
        "what the caps leave on their paths), "
        "e.g. anchor=false,derived_ai=false for HPCC's rule before the plan anchoring",
    )
    run.add_argument("--no-plot", action="store_true", help="do not write comparison.png")
    add_json(run)
    run.set_defaults(func=cmd_experiment_run)
    ls = esub.add_parser("list", help="the built-in presets")
    add_json(ls)
    ls.set_defaults(func=cmd_experiment_list)
    _add_matrix(esub, add_json)
    show = esub.add_parser("show", help="print a results directory's comparison")
    show.add_argument("dir", metavar="DIR", help="results/<name>-<time>/ (or its results.json)")
    add_json(show)
    show.set_defaults(func=cmd_experiment_show)


def _add_matrix(esub: Any, add_json: Any) -> None:
    """``icectl experiment matrix``'s options."""
    mx = esub.add_parser(
        "matrix",
        help="schemes x scenarios x seeds: DIR/matrix.json and DIR/matrix.png",
        description="Run every scheme (traffic/modes.py) on every scenario for N seeds and "
        "write DIR/matrix.json (busbw / bound median, p10, p90 per cell, the ceiling of each "
        "scheme's paths, the best peer and ICE / best peer; schema in sim/README.md) and "
        "DIR/matrix.png (heatmap, best peer boxed). Engine sim: the fluid simulator's "
        "scenarios (sim/scenarios.py) at --gpus GPUs. Engine virtual: the scenarios with a "
        "small packet-level preset, every scheme in one virtual-time run per seed; adds each "
        "scheme's queue p99 and losses.",
    )
    mx.add_argument(
        "--engine",
        choices=("sim", "virtual"),
        default="sim",
        help="sim (default): the fluid simulator's scenarios at --gpus GPUs; virtual: the "
        "packet-level presets (collisions=ecmp-collides, two-jobs, incast, background, "
        "failure=link-down, job-arrives, incast-storage) "
        "on embedded ice.p4 switches in virtual time, the ceiling from the simulator on each "
        "run's paths (experiment/README.md)",
    )
    mx.add_argument("--seeds", type=int, default=20, help="seeds 1..N per cell (default 20)")
    mx.add_argument(
        "--scenarios",
        default=None,
        help="comma-separated (default: all eight in sim, the six with a preset in virtual)",
    )
    mx.add_argument(
        "--schemes",
        default=None,
        help="comma-separated modes (default: eight in sim; ecmp+dcqcn, ecmp+hpcc, spray+hpcc, "
        "ice in virtual)",
    )
    mx.add_argument(
        "--gpus", type=int, default=None, help="GPUs (multiple of 16; default 128; sim only)"
    )
    mx.add_argument(
        "--message-mib",
        type=int,
        default=None,
        help="collective message in MiB (default 32; sim only)",
    )
    mx.add_argument(
        "--channels",
        type=int,
        default=None,
        help="NCCL channels of every ring (default 8; sim only)",
    )
    mx.add_argument(
        "--placement",
        default=None,
        help="ranks on hosts: scattered (default: a seeded shuffle), packed (host order, leaf "
        "after leaf) or interleaved (round robin over the leaves); sim only",
    )
    mx.add_argument(
        "--sweep",
        default=None,
        metavar="PARAM=V1,V2,...",
        help="one matrix per value of message-mib, channels or placement (sim only): "
        "DIR/PARAM-VALUE/ each, and DIR/sweep.json with ICE / best peer per value and scenario "
        "(sim/README.md, sweeps)",
    )
    mx.add_argument(
        "--workers",
        type=int,
        default=1,
        help="local Dask worker processes (default 1: serial, in this process; same results)",
    )
    mx.add_argument(
        "--cluster",
        default=None,
        metavar="tcp://HOST:PORT",
        help="run the scenario-seed tasks on this Dask scheduler (sim/README.md, sweeps)",
    )
    mx.add_argument(
        "--out",
        type=Path,
        required=True,
        help="directory for matrix.json/.png (and tasks/: each scenario-seed task as it finishes)",
    )
    mx.add_argument(
        "--resume",
        action="store_true",
        help="take the tasks in DIR/tasks/ that an earlier run with the same --gpus, "
        "--message-mib and --schemes finished instead of running them again (--engine sim "
        "without --cluster: also the finished runs of a task left unfinished, kept in "
        "DIR/tasks/*.partial.json)",
    )
    mx.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress on stderr (a bar on a terminal, else a line per finished task)",
    )
    add_json(mx)
    mx.set_defaults(func=cmd_experiment_matrix)


def load_for_run(args: argparse.Namespace) -> Any:
    """The experiment named by FILE or --preset, with the command line's overrides."""
    from dataclasses import replace

    from icefabric.experiment.config import load_experiment, packet_modes
    from icefabric.experiment.presets import load_preset

    if (args.file is None) == (args.preset is None):
        raise CliError(
            "experiment run: give an experiment FILE or --preset NAME (one of them)", EXIT_USAGE
        )
    exp = load_experiment(args.file) if args.file else load_preset(args.preset)
    if args.modes is not None:  # --modes "" is an error, not "the file's modes"
        modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
        known = packet_modes()
        bad = [m for m in modes if m not in known]
        if bad or not modes:
            raise CliError(
                f"--modes: expected names from {', '.join(known)}, got {args.modes!r}", EXIT_USAGE
            )
        if len(set(modes)) != len(modes):
            raise CliError(f"--modes: a mode is named twice in {args.modes!r}", EXIT_USAGE)
        exp = replace(exp, modes=modes)
    if args.engine:
        exp = replace(exp, engine=args.engine)
    if args.target:
        exp = replace(exp, target=args.target)
    if exp.target != "embedded" and exp.engine != "mininet":
        raise CliError(
            f"--target {exp.target}: runs on the mininet engine only; add --engine mininet",
            EXIT_USAGE,
        )
    if getattr(args, "ice", None):
        exp = replace(exp, ice=parse_ice_overrides(args.ice, exp.ice))
    if args.seed is not None:
        if not 0 <= args.seed < 2**32:
            raise CliError(f"--seed: expected an integer 0..2^32-1, got {args.seed}", EXIT_USAGE)
        exp = replace(exp, seed=args.seed)
    return exp


def parse_ice_overrides(text: str, base: Any) -> Any:
    """``--ice anchor=false,eta=0.9`` over ``base`` (CliError naming the bad item)."""
    from dataclasses import asdict

    from icefabric.experiment.config import ExperimentError, _ice

    raw: dict[str, Any] = {}
    for item in text.split(","):
        key, sep, value = item.strip().partition("=")
        if not sep or not key:
            raise CliError(f"--ice: expected KEY=VALUE items, got {item.strip()!r}", EXIT_USAGE)
        v = value.strip().lower()
        raw[key.strip()] = True if v == "true" else False if v == "false" else _num(v)
    errs: list[str] = []
    knobs = _ice({**asdict(base), **raw}, lambda k, m: errs.append(f"--ice: {k}: {m}"))
    if errs:
        raise CliError(errs[0], EXIT_USAGE) from ExperimentError(errs)
    return knobs


def _num(v: str) -> Any:
    try:
        return float(v)
    except ValueError:
        return v


def busy_check(exp: Any) -> None:
    """CliError (exit 2, one line) when another Mininet holds the topology's interfaces."""
    try:
        from icefabric.topo.mininet import busy_interfaces, busy_message
    except ImportError:  # no Mininet: the engine says so itself
        return
    busy = busy_interfaces(exp.topology)
    if busy:
        raise CliError(f"experiment run: {busy_message(exp.topology, busy)}", EXIT_USAGE)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def cmd_experiment_run(args: argparse.Namespace) -> int:
    """icectl experiment run: all modes, the table, results.json and comparison.png."""
    from icefabric.experiment.report import (
        comparison_table,
        links_table,
        run_with_progress,
    )

    exp = load_for_run(args)
    if exp.target == "bmv2":  # before the run: a missing tool is a usage error, not a failed mode
        from icefabric.p4src import ICE_P4
        from icefabric.target.bmv2 import Bmv2Unavailable, build_pipeline, check_tools

        try:
            check_tools()
            build_pipeline(ICE_P4)
        except Bmv2Unavailable as exc:
            raise CliError(str(exc), EXIT_USAGE) from None
    if exp.engine == "mininet":  # before anything is written: another network in the way
        busy_check(exp)
    try:  # before the run: an unwritable --out would only fail after every mode ran
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"--out {args.out}: cannot create it: {exc.strerror}", EXIT_USAGE) from None
    if exp.engine == "mininet" and threading.current_thread() is threading.main_thread():
        # SIGTERM (timeout, kill) unwinds like Ctrl-C, so the engine's teardown runs: host
        # processes killed, net.stop(); Python's default would leave veths and hosts behind
        signal.signal(signal.SIGTERM, _interrupt)
    outcome = run_with_progress(
        exp,
        render.console(sys.stderr),
        out_base=args.out,
        plot=not args.no_plot,
        label=f"{exp.name}: {{mode}}",
        quiet=args.json,
    )
    if args.json:
        render.emit_json(outcome.doc)
    else:
        con = render.console()
        con.print(comparison_table(outcome.doc))
        con.print(links_table(outcome.doc))
        if outcome.directory is not None:
            con.print(
                f"results: {outcome.directory}/results.json"
                + ("" if args.no_plot else f", {outcome.directory}/comparison.png")
            )
    return EXIT_OK if outcome.ok else EXIT_RUNTIME


def cmd_experiment_list(args: argparse.Namespace) -> int:
    """icectl experiment list: every preset with its topology, workload and modes."""
    from icefabric.experiment.presets import load_preset, preset_names

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
                + (f" (+{len(e.job.phases) - 1} phases)" if len(e.job.phases) > 1 else "")
                + (f" (+{len(e.more_jobs)} jobs)" if e.more_jobs else ""),
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
    from icefabric.experiment import results
    from icefabric.experiment.report import comparison_table, links_table

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
    except (KeyError, TypeError, AttributeError, ValueError, IndexError) as exc:
        what = f"{type(exc).__name__}: {str(exc)[:80]}"
        raise CliError(
            f"{args.dir}: results.json does not follow the schema ({what})", EXIT_USAGE
        ) from None
    return EXIT_OK


def _names(text: str | None, default: tuple[str, ...], what: str) -> tuple[str, ...]:
    if text is None:
        return default
    names = tuple(x.strip() for x in text.split(",") if x.strip())
    if not names or len(set(names)) != len(names):
        raise CliError(
            f"--{what}: expected distinct comma-separated names, got {text!r}", EXIT_USAGE
        )
    return names


def _layout(args: argparse.Namespace) -> Any:
    """--channels and --placement as a scenarios.Layout (ValueError naming the bad one)."""
    from icefabric.sim.scenarios import DEFAULT_LAYOUT, Layout

    return Layout(
        channels=DEFAULT_LAYOUT.channels if args.channels is None else args.channels,
        placement=DEFAULT_LAYOUT.placement if args.placement is None else args.placement,
    )


def _sweep(args: argparse.Namespace, gpus: int, mib: int, common: dict[str, Any]) -> int:
    """``matrix --sweep``: one matrix per value (sim/matrix_sweep.py), DIR/sweep.json."""
    from icefabric.sim.matrix_sweep import parse_sweep, run_sweep, sweep_markdown, write_sweep

    param, values = parse_sweep(args.sweep)
    kw = {k: v for k, v in common.items() if k != "tasks_dir"}
    doc = run_sweep(
        param, values, out=args.out, gpus=gpus, message=mib << 20, layout=_layout(args), **kw
    )
    doc["command"] = (
        f"icectl experiment matrix --engine sim --sweep {args.sweep} --seeds {args.seeds} "
        f"--gpus {gpus} --message-mib {mib} --channels {doc['channels']} "
        f"--placement {doc['placement']} --workers {args.workers} "
        f"--scenarios {','.join(common['scenarios'])} --schemes {','.join(common['schemes'])}"
    )
    write_sweep(doc, args.out)
    if args.json:
        render.emit_json(doc)
        return EXIT_OK
    print(sweep_markdown(doc), end="")
    print(f"wrote {args.out / 'sweep.json'} and a matrix per value ({doc['cpu_s']:.0f} CPU s)")
    return EXIT_OK


def _matrix_sizes(args: argparse.Namespace) -> tuple[int, int]:
    """--gpus and --message-mib (MiB) checked for the engine: the simulator's scale, or none at
    packet level (the presets fix their fabrics and messages)."""
    if args.engine == "virtual":
        for flag, value in (
            ("--gpus", args.gpus),
            ("--message-mib", args.message_mib),
            ("--channels", args.channels),
            ("--placement", args.placement),
            ("--sweep", args.sweep),
        ):
            if value is not None:
                raise CliError(
                    f"{flag}: the packet-level matrix (--engine virtual) runs the presets' own "
                    "fabrics, jobs and messages; give it with --engine sim only",
                    EXIT_USAGE,
                )
        return 0, 0
    gpus = 128 if args.gpus is None else args.gpus
    mib = 32 if args.message_mib is None else args.message_mib
    if not 16 <= gpus <= 16384 or gpus % 16:
        raise CliError(f"--gpus: expected a multiple of 16 in 16..16384, got {gpus}", EXIT_USAGE)
    if not 1 <= mib <= 4096:
        raise CliError(f"--message-mib: expected 1..4096, got {mib}", EXIT_USAGE)
    from icefabric.sim.fluid import AUTO_DT_BITS
    from icefabric.sim.scenarios import ring_step_cap

    cap = ring_step_cap(gpus, mib << 20)
    if cap < 1.0:
        need = math.ceil(gpus * AUTO_DT_BITS / 8 / 2**20)
        print(
            f"icectl experiment matrix: warning: at {gpus} GPUs a {mib} MiB ring "
            f"all-reduce is latency-bound in the simulator (a ring step takes one time step): "
            f"every scheme scores at most {cap:.3f} of the bound; --message-mib {need} or more "
            "lifts that (sim/README.md, the peers matrix)",
            file=sys.stderr,
        )
    return gpus, mib


def cmd_experiment_matrix(args: argparse.Namespace) -> int:
    """icectl experiment matrix: the peers matrix (sim/matrix.py; at packet level
    experiment/matrix.py)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from icefabric.experiment.matrix import (
        DEFAULT_PACKET_SCHEMES,
        PACKET_PRESETS,
        run_packet_matrix,
    )
    from icefabric.sim.matrix import DEFAULT_SCHEMES, run_matrix, write_matrix
    from icefabric.sim.scenarios import SCENARIOS
    from icefabric.sim.sweep import SweepError

    packet = args.engine == "virtual"
    scenarios = _names(args.scenarios, tuple(PACKET_PRESETS if packet else SCENARIOS), "scenarios")
    schemes = _names(args.schemes, DEFAULT_PACKET_SCHEMES if packet else DEFAULT_SCHEMES, "schemes")
    if not 1 <= args.seeds <= 1000:
        raise CliError(f"--seeds: expected 1..1000, got {args.seeds}", EXIT_USAGE)
    if not 1 <= args.workers <= 64:
        raise CliError(f"--workers: expected 1..64, got {args.workers}", EXIT_USAGE)
    gpus, mib = _matrix_sizes(args)
    # on a terminal a bar; else (stderr to a file or a pipe, where rich's bar shows nothing until
    # the end) one plain line per finished scenario-seed task
    lines = not args.no_progress and not sys.stderr.isatty()
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=render.console(sys.stderr),
        disable=args.no_progress or lines,
    )
    start = time.monotonic()
    with bar:
        task = bar.add_task("matrix", total=None)

        def hook(done: int, total: int, what: str) -> None:
            bar.update(task, completed=done, total=total, description=f"matrix: {what}")
            if lines:
                print(
                    f"matrix: {done}/{total} tasks, {what}, "
                    f"{time.monotonic() - start:.0f} s elapsed",
                    file=sys.stderr,
                    flush=True,
                )

        common: dict[str, Any] = {
            "scenarios": scenarios,
            "schemes": schemes,
            "seeds": args.seeds,
            "progress": hook,
            "workers": args.workers,
            "cluster": args.cluster,
            "tasks_dir": args.out / "tasks",
            "resume": args.resume,
        }
        try:
            if packet:
                doc = run_packet_matrix(**common)
            elif args.sweep:
                return _sweep(args, gpus, mib, common)
            else:
                doc = run_matrix(gpus=gpus, message=mib << 20, layout=_layout(args), **common)
        except ValueError as exc:
            raise CliError(f"icectl experiment matrix: {exc}", EXIT_USAGE) from None
        except SweepError as exc:
            raise CliError(f"icectl experiment matrix: {exc}", EXIT_RUNTIME) from None
    doc["command"] = (
        f"icectl experiment matrix --engine {args.engine} --seeds {args.seeds} "
        + (
            ""
            if packet
            else f"--gpus {gpus} --message-mib {mib} --channels {doc['channels']} "
            f"--placement {doc['placement']} "
        )
        + f"--workers {args.workers} --scenarios {','.join(scenarios)} "
        + (f"--cluster {args.cluster} " if args.cluster else "")
        + f"--schemes {','.join(schemes)}"
    )
    write_matrix(doc, args.out)
    if args.json:
        render.emit_json({k: v for k, v in doc.items() if k != "per_seed"})
        return EXIT_OK
    con = render.console()
    for sc, cell in doc["scenarios"].items():
        d = cell.get("ice_over_best_peer_dist")
        e = cell.get("ice_over_ecmp_dcqcn")
        ice = cell["schemes"].get("ice", {}).get("busbw_over_bound", {})
        con.print(
            f"{sc:15s} best peer {cell.get('best_peer', '-'):14s}"
            + (f" ICE÷best {d['median']:.2f} [{d['p10']:.2f}, {d['p90']:.2f}]" if d else "")
            + (f"  ICE÷ECMP+DCQCN {e['median']:.2f}" if e else "")
            + (f"  ICE {ice['median']:.3f}" if ice else "")
            + f"  ceiling {cell['ceiling']['median']:.3f}"
        )
        for name, c in cell["schemes"].items():
            if c.get("losses") or c.get("errors"):
                con.print(
                    f"  {name}: {c.get('losses', 0)} packets lost over the seeds"
                    + (f"; errors: {'; '.join(c['errors'])}" if c.get("errors") else "")
                )
    con.print(f"wrote {args.out / 'matrix.json'} and matrix.png ({doc['cpu_s']:.0f} CPU s)")
    return EXIT_OK
