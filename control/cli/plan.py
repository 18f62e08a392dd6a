"""icectl plan (dry-run planning with ice.p4 ECMP's load beside it) and icectl run (the daemon)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from icefabric.control import render
from icefabric.control.cli.common import EXIT_OK, EXIT_RUNTIME, Verbs, int_range
from icefabric.control.fabric import MODES
from icefabric.control.p4rt.tofino import TOFINO_FORMATS

# ECMP's distribution: one float per draw and a CRC per flow and draw (1e6 draws: 8 MB, seconds).
MAX_DRAWS = 1_000_000


def plan_report(
    topo_path: str,
    job_paths: list[str],
    *,
    method: str,
    budget_s: float,
    work_budget: int | None = None,
    draws: int = 1000,
    seed: int = 1,
    extra_jobs: Sequence[tuple[Any, str]] = (),
) -> dict[str, Any]:
    """Plan the jobs on the topology without touching any switch; plain data for JSON/tables.

    ECMP's figures come from ice.p4's own ECMP (control/planner/ecmp.py): for the flows' actual
    keys (the real UDP source port and QP where the job gives them, else the stand-ins the
    controller installs and senders use) and over ``draws`` seeded random source-port draws.
    ``extra_jobs`` are jobs built elsewhere (from a CCL log), each with the file it came from.
    """
    from icefabric.control.ccl.demand import demand_from_jobs
    from icefabric.control.ccl.job import load_job
    from icefabric.control.fabric import FabricOptions, allocate_tags
    from icefabric.control.planner.ecmp import EcmpModel
    from icefabric.control.planner.exact import cut_lower_bound
    from icefabric.control.planner.heuristic import fabric_mask
    from icefabric.control.planner.planner import Planner
    from icefabric.control.topology import Topology
    from icefabric.topo.spec import load_topology

    spec = load_topology(topo_path)
    topo = Topology(spec)
    jobs = [load_job(p) for p in job_paths] + [j for j, _ in extra_jobs]
    _check_hosts(spec, jobs, job_paths + [src for _, src in extra_jobs])
    demand = demand_from_jobs(jobs)
    planner = Planner(topo, method=method, time_budget_s=budget_s, work_budget=work_budget)
    planner.add(demand)
    ex = planner.explain(ecmp=True)
    plan = ex.plan
    fabric = [row for row in ex.links if row["kind"] == "fabric"]
    max_fabric = max((_num(r["seconds"]) for r in fabric), default=0.0)
    ecmp_fabric = max((_num(r.get("ecmp_seconds", 0.0)) for r in fabric), default=0.0)
    use_qp = FabricOptions().use_qp_in_hash  # what `icectl run` installs
    model = EcmpModel(topo, use_qp_in_hash=use_qp)
    state = planner.state
    fab_mask = fabric_mask(state)
    bound = cut_lower_bound(state, fabric_only=True)
    dist = model.draws(state, n_draws=draws, seed=seed, fabric=fab_mask, bound_s=bound)
    live = [state.flows[i] for i in state.live_rows().tolist()]
    tagmap = allocate_tags(topo)
    tags = {
        f.flow_id: tagmap.tag(f.src_leaf, f.dst_leaf, f.path_index)
        if f.path_index >= 0 and f.src_leaf != f.dst_leaf
        else None
        for f in plan.flows
    }
    return {
        "topology": spec.name,
        "jobs": [j.name for j in jobs],
        "method": plan.method,
        "flows": len(plan.flows),
        "bytes": float(sum(f.bytes for f in plan.flows)),
        "elapsed_s": plan.elapsed_s,
        "max_load_s": plan.max_load_s,
        "lower_bound_s": plan.lower_bound_s,
        "gap": max(0.0, plan.gap),
        "ecmp_max_load_s": ex.ecmp_max_load_s,
        "fabric_max_load_s": max_fabric,
        "ecmp_fabric_max_load_s": ecmp_fabric,
        "ecmp": {
            "model": model.description,
            "use_qp_in_hash": use_qp,
            "keys": {
                "flows": len(live),
                "known_udp_sport": sum(1 for f in live if f.udp_sport is not None),
                "known_qp": sum(1 for f in live if f.qp is not None),
                "stand_in": "49152 + crc32(flow_id) % 16384 / 0x100 + crc32('qp:' + flow_id)",
            },
            "actual_keys": {
                "max_load_s": ex.ecmp_max_load_s,
                "fabric_max_load_s": ecmp_fabric,
            },
            "random_sports": {
                **dist.summary(),
                "fabric_bound": "cut lower bound on the max fabric-link load",
                "max_load_s": list(dist.max_load_s),
            },
        },
        "unrouted": dict(plan.unrouted),
        "paths": [{**f, "tag": tags.get(str(f["flow_id"]), -1)} for f in ex.flows],
        "links": ex.links,
    }


def _num(value: object) -> float:
    """A number from the planner's plain-data rows."""
    if not isinstance(value, int | float):
        raise TypeError(f"expected a number, got {value!r}")
    return float(value)


def _check_hosts(spec: Any, jobs: list[Any], paths: list[str]) -> None:
    from icefabric.topo.spec import SpecError

    known = {h.name for h in spec.hosts}
    errors = []
    for job, path in zip(jobs, paths, strict=True):
        for r in job.ranks:
            if r.host not in known:
                errors.append(
                    f"{path}: ranks[{r.rank}].host: no host {r.host!r} in topology {spec.name!r}"
                )
    if errors:
        raise SpecError(errors)


def _cmd_plan(args: argparse.Namespace) -> int:
    from icefabric.control.cli.ccl import log_job_for_plan

    extra = log_job_for_plan(args)
    report = plan_report(
        args.topo,
        args.job or [],
        method=args.method,
        budget_s=args.budget,
        work_budget=args.work_budget,
        draws=args.draws,
        seed=args.seed,
        extra_jobs=extra,
    )
    if args.json:
        render.emit_json(report)
        return EXIT_OK
    con = render.console()
    ice_f = report["fabric_max_load_s"]
    ecmp_f = report["ecmp_fabric_max_load_s"]
    ratio = f" = {ecmp_f / ice_f:.2f}x ICE" if ice_f > 0 else ""
    em = report["ecmp"]
    keys = em["keys"]
    rs = em["random_sports"]
    con.print(
        f"[bold]{report['topology']}[/bold]: {report['flows']} flows of "
        f"{', '.join(report['jobs'])}, {render.human_bytes(report['bytes'])}; method "
        f"{report['method']} in {report['elapsed_s'] * 1e3:.1f} ms"
    )
    con.print(
        f"max link load {report['max_load_s'] * 1e3:.3g} ms at line rate (lower bound "
        f"{report['lower_bound_s'] * 1e3:.3g} ms, gap {report['gap'] * 100:.1f} %)"
    )
    con.print(f"busiest fabric link, ICE (the planner's paths): {ice_f * 1e3:.3g} ms")
    con.print(
        f"busiest fabric link, ECMP (model: {em['model']}), these flows' keys "
        f"({keys['known_udp_sport']}/{keys['flows']} real UDP source ports, "
        f"{keys['known_qp']}/{keys['flows']} real QPs, the rest stand-ins): "
        f"{ecmp_f * 1e3:.3g} ms{ratio}"
    )
    con.print(
        f"busiest fabric link, ECMP (same model), {rs['n']} random UDP source-port draws "
        f"(seed {rs['seed']}): median {rs['median_s'] * 1e3:.3g} ms, p99 "
        f"{rs['p99_s'] * 1e3:.3g} ms, worst {rs['worst_s'] * 1e3:.3g} ms; "
        f"P(some fabric link above the bound {rs['bound_s'] * 1e3:.3g} ms) = "
        f"{rs['p_above_bound'] * 100:.1f} %"
    )
    if not args.no_flows:
        con.print(
            render.table(
                "paths",
                ["flow", "src", "dst", "tag", "path", "bytes"],
                [
                    (
                        p["flow_id"],
                        p["src"],
                        p["dst"],
                        p["tag"],
                        p["path"],
                        render.human_bytes(p["bytes"]),
                    )
                    for p in report["paths"]
                ],
            )
        )
    rows = [r for r in report["links"] if args.all_links or r["kind"] == "fabric"]
    con.print(
        render.table(
            "link load (ms at line rate; util = load / busiest host link; ECMP: ice.p4's hash "
            "on these flows' keys)",
            ["link", "Gbit/s", "flows", "ICE ms", "ICE util", "ECMP ms", "ECMP util"],
            [
                (
                    r["name"],
                    r["rate_gbps"],
                    r["flows"],
                    r["seconds"] * 1e3,
                    r["utilisation"],
                    r.get("ecmp_seconds", 0.0) * 1e3,
                    r.get("ecmp_utilisation", 0.0),
                )
                for r in rows
            ],
        )
    )
    for fid, reason in report["unrouted"].items():
        con.print(f"[red]unrouted[/red] {fid}: {reason}")
    return EXIT_OK if not report["unrouted"] else EXIT_RUNTIME


def _add_plan(verbs: Verbs) -> None:
    """``icectl plan``."""
    p = verbs.add(
        "plan",
        help="dry run: plan jobs on a topology, per-link load with ice.p4 ECMP's load beside it",
        description="Plan jobs without any switch. Beside the plan: ECMP's per-link load as "
        "ice.p4's ECMP mode would place these flows (its crc32 over the flows' keys: real UDP "
        "source port and QP when the job gives them, else the stand-ins the controller "
        "installs), and the busiest fabric link over seeded random source-port draws.",
    )
    p.add_argument("--topo", required=True, help="topology spec (YAML/JSON)")
    p.add_argument(
        "--job",
        action="append",
        default=[],
        help="job description (repeat for several jobs; or --nccl-log)",
    )
    p.add_argument(
        "--method",
        choices=("auto", "exact", "heuristic"),
        default="auto",
        help="exact MILP, greedy+repair heuristic, or auto (exact when few flows choose)",
    )
    p.add_argument(
        "--budget", type=float, default=1.0, help="heuristic wall-clock budget, seconds (default 1)"
    )
    p.add_argument(
        "--work-budget",
        type=int_range(0),
        default=None,
        metavar="STEPS",
        help="count the heuristic's repair steps instead of the clock (the same plan on any "
        "machine; replaces --budget; the experiments use 100000)",
    )
    p.add_argument(
        "--draws",
        type=int_range(1, MAX_DRAWS),
        default=1000,
        help=f"random UDP source-port draws for ECMP's distribution (default 1000, at most "
        f"{MAX_DRAWS:,})",
    )
    p.add_argument("--seed", type=int_range(0), default=1, help="seed of the draws (default 1)")
    p.add_argument("--all-links", action="store_true", help="host links too, not only fabric")
    p.add_argument("--no-flows", action="store_true", help="omit the per-flow path table")
    verbs.add_json(p)
    from icefabric.control.cli.ccl import add_log_options

    add_log_options(p)
    p.set_defaults(func=_cmd_plan)


def _cmd_run(args: argparse.Namespace) -> int:
    from icefabric.control.daemon.service import run_daemon

    return run_daemon(args)


def _add_run(verbs: Verbs) -> None:
    """``icectl run`` (the controller daemon)."""
    p = verbs.add(
        "run",
        help="the controller daemon (primary, or --backup standby)",
        description="Connect to every switch of the topology, push the pipeline, install base "
        "forwarding and planned jobs, and serve icectl on the API socket until SIGINT/SIGTERM.",
    )
    p.add_argument("--topo", required=True, help="topology spec (switch addresses, links)")
    p.add_argument("--backup", action="store_true", help="standby: take over when primary dies")
    p.add_argument(
        "--election-id",
        type=int,
        default=None,
        help="P4Runtime election id (default 100 for primary, 50 for --backup)",
    )
    p.add_argument(
        "--target",
        choices=("embedded", "bmv2", "tofino"),
        default="embedded",
        help="device config to push (default embedded)",
    )
    p.add_argument("--p4", default=None, help="P4 program (default: the packaged p4src/ice.p4)")
    p.add_argument("--bmv2-json", default=None, help="with --target bmv2: p4c's BMv2 JSON")
    p.add_argument(
        "--p4info",
        default=None,
        help="with --target bmv2: p4c's P4Info text; with --target tofino: bf-p4c's "
        "(default: p4info.txt in --tofino-out)",
    )
    p.add_argument(
        "--tofino-out",
        default=None,
        metavar="DIR",
        help="with --target tofino: bf-p4c's output folder for p4src/tna/ice.p4 (the .conf, "
        "bf-rt.json, <pipe>/context.json and tofino.bin); ports follow each switch's sdk_ports",
    )
    p.add_argument(
        "--tofino-format",
        choices=TOFINO_FORMATS,
        default=TOFINO_FORMATS[0],
        help="p4_device_config packing for Tofino: bfrt (Stratum BfPipelineConfig, default) or "
        "legacy (PI's length-prefixed name/tofino.bin/context.json)",
    )
    p.add_argument(
        "--cpu-port",
        type=int,
        default=None,
        metavar="PORT",
        help="the switches' CPU port for telemetry reports (default 255; 64 with --target "
        "tofino, as p4src/tna/ice.p4 is built unless -DICE_TNA_CPU_PORT says otherwise)",
    )
    p.add_argument(
        "--mode",
        choices=tuple(MODES),
        default="ice",
        help="ice: planned paths, else flowlets; planned-ecmp; ecmp: the baseline; spray: a path "
        "per packet from its PSN, plans ignored (default ice)",
    )
    p.add_argument("--job", action="append", default=[], help="job to plan at start (repeat)")
    p.add_argument(
        "--method",
        choices=("auto", "exact", "heuristic"),
        default="auto",
        help="planner method (default auto)",
    )
    p.add_argument(
        "--connect-timeout", type=float, default=10.0, help="seconds to wait for every switch"
    )
    p.add_argument(
        "--state",
        default=None,
        help="file where primary and backup share the running jobs "
        "(default <runtime dir>/<topology>.state.json, see control/README.md)",
    )
    p.add_argument(
        "--switch-addr",
        action="append",
        default=[],
        metavar="NAME=HOST:PORT",
        help="reach this switch's P4Runtime server here instead of 127.0.0.1:<its grpc_port> "
        "(repeat; a controller on another server than the switches)",
    )
    p.add_argument(
        "--switch-dead",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="treat a switch whose P4Runtime connection broke this long ago as failed and "
        "replan around it (default 1; 0: never). A killed switch is routed around within "
        "this + the replan (< 3 s in all, control/README.md)",
    )
    p.add_argument(
        "--probe-interval",
        type=float,
        default=100.0,
        metavar="MS",
        help="send an LLDP link probe out of every fabric port every MS milliseconds and "
        "replan around links whose probes stop (default 100; 0 disables probing)",
    )
    p.add_argument(
        "--probe-misses",
        type=int,
        default=3,
        metavar="N",
        help="a link is down after N probe intervals without a probe in one direction, and up "
        "again after N intervals with probes both ways (default 3)",
    )
    p.add_argument("--socket", default=argparse.SUPPRESS, help="serve the API on this socket")
    from icefabric.control.agents.options import add_agent_options

    add_agent_options(p)
    from icefabric.control.telemetry.options import add_telemetry_options

    add_telemetry_options(p)
    from icefabric.control.store.options import add_store_options

    add_store_options(p)
    p.set_defaults(func=_cmd_run)


def register(verbs: Verbs) -> None:
    """``icectl plan`` (dry run) and ``icectl run`` (the controller daemon)."""
    _add_plan(verbs)
    _add_run(verbs)
