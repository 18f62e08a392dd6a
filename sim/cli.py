"""``icectl sim run`` (one configuration) and ``icectl sim compare`` (several, same seed)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

from icefabric.control import render
from icefabric.control.cli.common import (
    EXIT_OK,
    EXIT_RUNTIME,
    EXIT_USAGE,
    CliError,
    Verbs,
    int_range,
)
from icefabric.sim.config import CONTROLS, MAX_ITERATIONS, ROUTINGS, SimConfig, SimConfigError
from icefabric.sim.results import SimResult

DEFAULT_COMPARE = ("ecmp+dcqcn", "ice+ice")
_DEF = SimConfig()


def _config(args: argparse.Namespace, routing: str, control: str) -> SimConfig:
    try:
        return SimConfig(
            routing=routing,
            control=control,
            caps=args.caps,
            cap_interval_us=args.cap_interval_us,
            cap_delay_us=args.cap_delay_us,
            dt_us=args.dt_us,
            max_time_us=args.max_time_ms * 1e3,
            pfc=args.pfc,
            seed=args.seed,
        )
    except SimConfigError as e:
        raise CliError(f"icectl sim: {e}", EXIT_USAGE) from None


def _mode_config(args: argparse.Namespace, name: str) -> SimConfig:
    """A mode of traffic/modes.py (its caps and PFC; --caps / --pfc do not apply)."""
    from icefabric.sim.config import config_for
    from icefabric.traffic.modes import get_mode

    m = get_mode(name)
    if "sim" not in m.engines:
        raise CliError(f"icectl sim: mode {name} does not run in the simulator", EXIT_USAGE)
    return config_for(m, dt_us=args.dt_us, max_time_us=args.max_time_ms * 1e3, seed=args.seed)


def _parse_pair(args: argparse.Namespace, text: str) -> SimConfig:
    """--config: a mode name of traffic/modes.py, or ROUTING+CONTROL."""
    from icefabric.traffic.modes import MODES

    if text in MODES:
        return _mode_config(args, text)
    parts = text.split("+")
    if len(parts) != 2 or parts[0] not in ROUTINGS or parts[1] not in CONTROLS:
        raise CliError(
            f"icectl sim compare: --config {text!r}: expected a mode ({', '.join(MODES)}) or "
            f"ROUTING+CONTROL with ROUTING one of {', '.join(ROUTINGS)} and CONTROL one of "
            f"{', '.join(CONTROLS)}",
            EXIT_USAGE,
        )
    return _config(args, parts[0], parts[1])


def _run(args: argparse.Namespace, cfg: SimConfig) -> SimResult:
    from icefabric.control.ccl.job import load_job
    from icefabric.control.topology import Topology
    from icefabric.sim.engine import Simulator
    from icefabric.sim.workload import workload_from_jobs
    from icefabric.topo.spec import load_topology

    spec = load_topology(args.topo)
    jobs = [load_job(p) for p in args.job]
    known = {h.name for h in spec.hosts}
    for job, path in zip(jobs, args.job, strict=True):
        for r in job.ranks:
            if r.host not in known:
                raise CliError(
                    f"{path}: ranks[{r.rank}].host: no host {r.host!r} in topology {spec.name!r}",
                    EXIT_USAGE,
                )
    try:  # every bound (iterations, flows, steps, memory) is checked before a run starts
        w = workload_from_jobs(jobs, iterations=args.iterations, a2a_window=args.a2a_window)
    except ValueError as e:
        raise CliError(f"icectl sim: --{e}", EXIT_USAGE) from None
    try:
        topo = Topology(spec)
        if cfg.mode is not None:  # E-ECMP's QPs, spraying's stripes
            from icefabric.sim.matrix import stripes_for
            from icefabric.sim.stripes import stripe
            from icefabric.traffic.modes import get_mode

            w = stripe(w, stripes_for(get_mode(cfg.mode), topo, 0))
        sim = Simulator(topo, w, cfg)
    except ValueError as e:
        raise CliError(f"icectl sim: {e}", EXIT_RUNTIME) from None
    try:
        return _go(sim, cfg, args.progress)
    except SimConfigError as e:
        raise CliError(f"icectl sim: {e}", EXIT_USAGE) from None


def _go(sim: Any, cfg: SimConfig, progress: bool) -> SimResult:
    if not progress:
        return sim.run()  # type: ignore[no-any-return]
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn(f"{cfg.label:<18}"),
        BarColumn(),
        TextColumn("{task.percentage:>5.1f}% of bytes, sim {task.fields[t]:.2f} ms"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task("sim", total=1.0, t=0.0)

        def hook(frac: float, t_us: float) -> None:
            bar.update(task, completed=frac, t=t_us / 1e3)

        return sim.run(progress=hook)  # type: ignore[no-any-return]


def _fmt(x: float, scale: float, digits: int = 3) -> str:
    return "-" if math.isnan(x) else f"{x * scale:.{digits}g}"


def _print(results: list[SimResult]) -> None:
    con = render.console()
    rows = []
    for r in results:
        for c in r.collectives:
            rows.append(
                (
                    r.label,
                    f"{c.job}/{c.phase}#{c.iteration}",
                    c.collective,
                    c.flows,
                    _fmt(c.time_us, 1e-3),
                    _fmt(c.busbw_bps, 1e-9),
                    f"{c.busbw_over_bound:.3f}",
                )
            )
    con.print(
        render.table(
            "collectives (busbw as nccl-tests; bound = the slowest sender NIC)",
            ["config", "collective", "kind", "flows", "time ms", "busbw Gbit/s", "busbw/bound"],
            rows,
        )
    )
    con.print(
        render.table(
            "fabric",
            [
                "config",
                "util mean",
                "util max",
                "queue p50 KB",
                "p99 KB",
                "max KB",
                "PFC pause ms",
                "CNPs",
                "unfinished",
                "sim ms",
                "wall s",
            ],
            [
                (
                    r.label,
                    f"{r.fabric_util_mean:.3f}",
                    f"{r.fabric_util_max:.3f}",
                    f"{r.queue_p50_bytes / 1e3:.3g}",
                    f"{r.queue_p99_bytes / 1e3:.3g}",
                    f"{r.queue_max_bytes / 1e3:.3g}",
                    f"{r.pfc_pause_us_total / 1e3:.3g}",
                    r.cnps,
                    r.unfinished,
                    f"{r.sim_time_us / 1e3:.3g}",
                    f"{r.wall_s:.2f}",
                )
                for r in results
            ],
        )
    )


def _write(out: str | None, results: list[SimResult], title: str) -> None:
    if not out:
        return
    from icefabric.files import check_output_dir
    from icefabric.sim.results import plot_results

    try:  # files are replaced only when they are the caller's own regular files
        d = check_output_dir(out)
        for r in results:
            r.write_json(d / f"{r.label}.json")
        plot_results(results, d / "sim.png", title=title)
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        raise CliError(f"icectl sim: --out: {where}{e.strerror or e}", EXIT_RUNTIME) from None


def _cmd_run(args: argparse.Namespace) -> int:
    cfg = _mode_config(args, args.mode) if args.mode else _config(args, args.routing, args.control)
    res = _run(args, cfg)
    _write(args.out, [res], f"{res.topology}: {res.label}")
    if args.json:
        render.emit_json(res.to_dict(trace=args.trace))
    else:
        _print([res])
    return EXIT_OK if res.unfinished == 0 else EXIT_RUNTIME


def _cmd_compare(args: argparse.Namespace) -> int:
    configs = [_parse_pair(args, c) for c in (args.config or list(DEFAULT_COMPARE))]
    results = [_run(args, cfg) for cfg in configs]
    _write(args.out, results, f"{results[0].topology}: " + " vs ".join(r.label for r in results))
    base = results[0].completion_us
    ratios = {
        r.label: (base / r.completion_us if r.completion_us > 0 else math.nan) for r in results
    }
    if args.json:
        render.emit_json(
            {
                "results": [r.to_dict(trace=args.trace) for r in results],
                "speedup_over_first": ratios,
            }
        )
    else:
        _print(results)
        con = render.console()
        for label, ratio in ratios.items():
            if math.isnan(ratio):
                con.print(f"{label}: no network traffic to compare")
                continue
            con.print(
                f"{label}: completion {_fmt(results[0].completion_us, 1e-3)} ms / "
                f"{_fmt(next(r.completion_us for r in results if r.label == label), 1e-3)} ms "
                f"= {ratio:.3f}x {results[0].label}"
            )
    return EXIT_OK if all(r.unfinished == 0 for r in results) else EXIT_RUNTIME


def _common(
    p: argparse.ArgumentParser, add_json: Callable[[argparse.ArgumentParser], None]
) -> None:
    p.add_argument("--topo", required=True, help="topology spec (YAML/JSON)")
    p.add_argument("--job", required=True, action="append", help="job description (repeat)")
    p.add_argument(
        "--iterations",
        type=int_range(1, MAX_ITERATIONS),
        default=1,
        help=f"repeat the jobs' phases N times (1..{MAX_ITERATIONS:,})",
    )
    p.add_argument(
        "--a2a-window",
        type=int_range(1),
        default=None,
        metavar="W",
        help="all-to-all as rounds of shifted peers, W per rank in flight (default: all at once)",
    )
    p.add_argument(
        "--caps",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the controller's water-filling caps (default: on with ice routing)",
    )
    p.add_argument(
        "--cap-interval-us",
        type=float,
        default=_DEF.cap_interval_us,
        help=f"how often the controller recomputes caps (default {_DEF.cap_interval_us:g})",
    )
    p.add_argument(
        "--cap-delay-us",
        type=float,
        default=_DEF.cap_delay_us,
        help="computed caps reach the senders this much later: the agent channel "
        f"(default {_DEF.cap_delay_us:g})",
    )
    p.add_argument("--pfc", action="store_true", help="lossless fabric: PFC pause on")
    p.add_argument(
        "--dt-us", type=float, default=None, help="time step (default: 200 KB at NIC rate)"
    )
    p.add_argument(
        "--max-time-ms", type=float, default=10_000.0, help="stop after this much simulated time"
    )
    p.add_argument("--seed", type=int_range(0), default=1, help="seed (flowlet draws)")
    p.add_argument("--out", default=None, help="directory for <config>.json and sim.png")
    p.add_argument("--trace", action="store_true", help="with --json: include the time series")
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="progress bar on stderr (default on)",
    )
    add_json(p)


def _sim_modes() -> list[str]:
    from icefabric.traffic.modes import modes_for

    return list(modes_for("sim"))


def register(verbs: Verbs) -> None:
    """``icectl sim run|compare``."""
    add_json = verbs.add_json
    sim = verbs.add("sim", help="fluid simulation of jobs on a (large) fabric")
    ssub = sim.add_subparsers(dest="sim_cmd", required=True)
    run = ssub.add_parser(
        "run",
        help="simulate the jobs under one routing + endpoint control",
        description="Simulate the jobs' collectives on the topology (sim/README.md): per "
        "collective time and busbw, fabric utilisation, queues, PFC pauses.",
    )
    _common(run, add_json)
    run.add_argument("--routing", choices=ROUTINGS, default="ecmp", help="default ecmp")
    run.add_argument("--control", choices=CONTROLS, default="dcqcn", help="default dcqcn")
    run.add_argument(
        "--mode",
        default=None,
        choices=_sim_modes(),
        help="a mode of traffic/modes.py instead of --routing/--control (E-ECMP, spraying, PFC ...)",
    )
    run.set_defaults(func=_cmd_run)
    cmp = ssub.add_parser(
        "compare",
        help="the same jobs under several configurations (default ecmp+dcqcn vs ice+ice)",
    )
    _common(cmp, add_json)
    cmp.add_argument(
        "--config",
        action="append",
        metavar="MODE|ROUTING+CONTROL",
        help="a mode of traffic/modes.py or ROUTING+CONTROL (repeat; default ecmp+dcqcn, ice+ice)",
    )
    cmp.set_defaults(func=_cmd_compare)
