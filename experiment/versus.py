"""The simulator beside a packet-level experiment: ``python -m icefabric.experiment.versus RESULTS``.

RESULTS is the ``results.json`` of ``icectl experiment run`` (the virtual-time engine, packets
through ice.p4 on embedded switches). The simulator runs the same topology (link rates scaled as
the experiment ran them), the same job and slices, and for the ECMP mode the very paths the
switches took (from the experiment's INT records: the keys its agents chose are not in the
results, the paths they produced are), ECN thresholds as the controller programs ice.p4 (Kmin,
Kmax in packets, Pmax from the mask). It prints both ICE ÷ ECMP ratios side by side.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from icefabric.control.ccl.demand import Flow
from icefabric.control.ccl.job import parse_job
from icefabric.control.fabric import FabricOptions
from icefabric.control.topology import Topology
from icefabric.experiment.options import ice_overhead_for
from icefabric.experiment.results import mode_paths
from icefabric.sim.bound import paths_ceiling, routes_ceiling
from icefabric.sim.config import config_for
from icefabric.sim.engine import LinkFailure, Simulator
from icefabric.sim.network import Routes, SimNetwork, route
from icefabric.sim.scenarios import with_background
from icefabric.sim.workload import Workload, workload_from_jobs
from icefabric.topo.spec import Defaults, TopologySpec, parse_topology
from icefabric.traffic.modes import MODES, get_mode

COMPARED = ("ecmp+dcqcn", "ice")  # modes of traffic/modes.py


class VersusError(ValueError):
    """The results file lacks what the comparison needs (the message names it)."""


def _scaled(spec: TopologySpec, scale: float, link_delay_us: float | None) -> TopologySpec:
    """The spec at the experiment's rates; link delays stretched by 1 / scale as it ran them."""
    d = spec.defaults
    defaults = Defaults(
        link_rate_gbps=d.link_rate_gbps * scale,
        host_rate_gbps=d.host_rate_gbps * scale,
        link_delay_us=d.link_delay_us if link_delay_us is None else link_delay_us / scale,
        grpc_base_port=d.grpc_base_port,
        priority_queues=d.priority_queues,
    )
    links = tuple(
        replace(
            ln,
            rate_gbps=None if ln.rate_gbps is None else ln.rate_gbps * scale,
            delay_us=None if link_delay_us is None else link_delay_us / scale,
        )
        for ln in spec.links
    )
    hosts = tuple(
        replace(h, rate_gbps=None if h.rate_gbps is None else h.rate_gbps * scale)
        for h in spec.hosts
    )
    return replace(spec, defaults=defaults, links=links, hosts=hosts)


def _paths_routes(net: SimNetwork, w: Workload, paths: dict[str, list[str]], source: str) -> Routes:
    """Aligned routes from node sequences (leaf, spine, ..., leaf) per flow id."""
    topo = net.topo
    by_nodes = {(ln.src, ln.dst): ln.id for ln in topo.links if ln.kind == "fabric"}
    leaf = {h.name: h.leaf for h in topo.spec.hosts}
    rows = []
    for f in w.flows:
        nodes = paths.get(f.flow_id)
        if nodes is None and leaf[f.src_host] == leaf[f.dst_host]:
            nodes = [leaf[f.src_host]]  # under one leaf: no fabric link to name
        if nodes is None:
            raise VersusError(f"{source}: modes[ecmp+dcqcn].paths: no path for {f.flow_id}")
        fabric = []
        for a, b in itertools.pairwise(nodes):
            lid = by_nodes.get((a, b))
            if lid is None:
                raise VersusError(f"{source}: path of {f.flow_id}: no link {a} -> {b}")
            fabric.append(lid)
        full = [topo.host_uplink(f.src_host), *fabric, topo.host_downlink(f.dst_host)]
        rows.append(net.align(full))
    return Routes(path=np.stack(rows), routing="ecmp")


@dataclass(frozen=True, slots=True)
class PacketRun:
    """What the simulator needs of a packet-level results document."""

    name: str  # the experiment's
    source: str
    modes: dict[str, Any]  # mode name -> its results.json entry
    spec: TopologySpec  # at the run's rates (``_scaled``)
    job_workload: Workload  # the job (every job of the run) alone
    measured: tuple[int, ...]  # the collectives scored: each job's first
    workload: Workload  # the job(s), plus the background flows as one unplanned collective
    failures: tuple[LinkFailure, ...]  # the run's link_down, at the run's (stretched) time
    scale: float
    mtu: int
    control_delay_us: float
    sample_n: int
    sample_gap: float

    @property
    def dt_us(self) -> float:
        """The simulator's step: two packet times at the fastest link."""
        return float(2 * self.mtu * 8 / (max(Topology(self.spec).capacity) * 8) * 1e6)


def load_run(data: Any, source: str) -> PacketRun:
    """The simulator's view of results.json ``data`` (read from ``source``)."""
    try:
        exp = data["experiment"]
        modes = {m["mode"]: m for m in data["modes"]}
        scale = float(exp["rates"]["scale"])
        mtu = int(exp["rates"]["mtu_bytes"])
        slices = int(exp.get("slices") or 1)
        delay = exp["rates"].get("link_delay_us")
        spec = _scaled(
            parse_topology(exp["topology"], source),
            scale,
            None if delay is None else float(delay),
        )
        jobs = [parse_job(exp["job"], source)]
        jobs += [parse_job(j["job"], source) for j in exp.get("jobs") or []]
        background = [
            Flow(
                flow_id=f"background/{i}",
                job="background",
                phase="storage",
                channel=0,
                src_host=str(b["src"]),
                dst_host=str(b["dst"]),
                src_rank=-1,
                dst_rank=-1,
                bytes=float(b["bytes"]),
            )
            for i, b in enumerate(exp.get("background") or [])
        ]
        down = exp.get("link_down")
        failures: tuple[LinkFailure, ...] = ()
        if down:
            by_nodes = {
                (ln.src, ln.dst): ln.id for ln in Topology(spec).links if ln.kind == "fabric"
            }
            link = by_nodes.get((str(down["a"]), str(down["b"])))
            if link is None:
                raise VersusError(
                    f"{source}: experiment.link_down: no link {down['a']} -> {down['b']}"
                )
            # the link stops drain_us after the controller is told; the paths move at once
            at = (float(down["at_us"]) + float(down.get("drain_us", 0.0))) / scale
            failures = (LinkFailure(link=link, at_us=at, detect_us=0.0),)
        job_w = workload_from_jobs(jobs, slices=slices)
        firsts = [0]  # each job's first collective: the jobs' scores
        for j in jobs[:-1]:
            firsts.append(firsts[-1] + len(j.phases))
        return PacketRun(
            name=str(exp["name"]),
            source=source,
            modes=modes,
            spec=spec,
            job_workload=job_w,
            measured=tuple(firsts),
            workload=with_background(job_w, background),
            failures=failures,
            scale=scale,
            mtu=mtu,
            control_delay_us=float(exp["rates"].get("control_delay_us", 0.0)),
            # results from before the sampling: 1; before the floor: none
            sample_n=int(exp.get("ice", {}).get("sample_n", 1)),
            sample_gap=float(exp.get("ice", {}).get("sample_gap", 0.0)),
        )
    except (KeyError, TypeError, ValueError) as e:
        if isinstance(e, VersusError):
            raise
        raise VersusError(f"{source}: missing or malformed field {e}") from None


def read_run(results_path: str | Path) -> PacketRun:
    """Read and check a results.json (bounded, a regular file) into a :class:`PacketRun`."""
    source = str(results_path)
    from icefabric.experiment.results import MAX_RESULTS_BYTES
    from icefabric.files import DataFileError, JsonError, parse_json, read_text

    try:  # bounded by bytes read, a regular file only, JSON of bounded nesting and integers
        data = parse_json(read_text(results_path, limit=MAX_RESULTS_BYTES, what="a results.json"))
    except DataFileError as e:
        raise VersusError(str(e).splitlines()[0]) from None
    except JsonError as e:
        raise VersusError(f"{source}: not valid JSON: {e}") from None
    return load_run(data, source)


def ceiling(run: PacketRun, mode: str) -> tuple[float, str]:
    """The ceiling of ``mode``'s paths in ``run`` (``sim/bound.py``: the best any rate
    allocation could do on them, the run's background deferred) for the job; busbw / bound, and
    where the paths came from.

    The paths are the ones the run's switches took (INT, or for a mode without INT the ECMP
    model the run checked) when the run recorded one for every flow, the mode sends each
    connection on one path (ECMP, planned) and no link went down; otherwise the simulator's own
    routing of the mode's balance (spraying's stripes; flowlet switching bounded by spraying's
    stripes; the paths replanned or re-hashed after a failure), which for ECMP hashes other
    keys than the run's NICs chose."""
    m = get_mode(mode)
    topo = Topology(run.spec)
    w = run.workload
    paths, _ = mode_paths(run.modes[mode]) if mode in run.modes else ({}, "")
    if not run.failures and m.balance in ("ecmp", "planned") and paths:
        try:
            routes = _paths_routes(SimNetwork(topo), w, paths, run.source)
        except VersusError:
            routes = None  # a flow without a recorded path: the simulator's routing below
        if routes is not None:
            return routes_ceiling(topo, w, routes.path, run.measured), "the run's paths"
    from icefabric.sim.matrix import ceiling_mode, stripes_for
    from icefabric.sim.stripes import stripe

    cm = ceiling_mode(m)
    k = stripes_for(cm, topo, len(run.failures))
    cfg = config_for(cm, dt_us=run.dt_us, mtu_bytes=run.mtu)
    value = paths_ceiling(topo, stripe(w, k), cfg, run.measured, run.failures)
    return value, f"simulator's {cm.sim_routing} routing"


def compare(results_path: str | Path) -> dict[str, Any]:
    """Run the simulator on the experiment of ``results_path``; both sides' figures."""
    run = read_run(results_path)
    source, modes, spec = run.source, run.modes, run.spec
    for m in COMPARED:
        if m not in modes or not modes[m].get("ok"):
            raise VersusError(f"{source}: modes: no successful {m!r} run")
    topo = Topology(spec)
    w = run.job_workload
    line = max(topo.capacity) * 8
    # ECN as the controller programs ice.p4 (packets; Pmax = 1 / (mask + 1)), per 100G here
    ecn = FabricOptions()
    per100 = run.mtu / 1e3 * 100e9 / line
    out: dict[str, Any] = {"experiment": run.name, "modes": {}}
    for mode in COMPARED:
        routing = MODES[mode].sim_routing
        cfg = config_for(
            MODES[mode],
            dt_us=run.dt_us,
            mtu_bytes=run.mtu,
            ecn_kmin_kb=ecn.ecn_kmin * per100,
            ecn_kmax_kb=ecn.ecn_kmax * per100,
            ecn_pmax=1.0 / (ecn.ecn_pmax_mask + 1),
            switch_latency_us=0.0,  # virtual-time switches forward in no time
            # caps as the packet level delivered them: one control delay late, stretched by
            # 1 / scale like every time constant, the first ones ahead when the job was known
            cap_delay_us=run.control_delay_us / run.scale,
            caps_ahead=bool(modes["ice"].get("engine", {}).get("caps_ahead", True)),
            # ICE's shim, INT records and feedback frames take their share of the fabric links
            wire_overhead=(
                ice_overhead_for(spec, run.mtu, run.sample_n, run.sample_gap)
                if MODES[mode].int_on
                else 0.0
            ),
        )
        net = SimNetwork(topo)
        if routing == "ecmp":
            # the paths INT named, else (a baseline run carries no INT) the ECMP model's paths
            # for the agents' keys, which the run checked against every fabric link's bytes
            paths, _ = mode_paths(modes[mode])
            routes = _paths_routes(net, w, paths, source)
        else:
            routes, _ = route(net, w.flows, routing)
        res = Simulator(topo, w, cfg, routes=routes).run()
        out["modes"][mode] = {
            "packet_level_busbw_over_bound": modes[mode]["busbw_over_bound"],
            "sim_busbw_over_bound": float(
                np.mean([res.collectives[i].busbw_over_bound for i in run.measured])
            ),
            "packet_level_completion_us": modes[mode]["completion_us"],
            "sim_completion_us": res.completion_us,
        }
    em, im = out["modes"]["ecmp+dcqcn"], out["modes"]["ice"]
    out["packet_level_ratio"] = em["packet_level_completion_us"] / im["packet_level_completion_us"]
    out["sim_ratio"] = em["sim_completion_us"] / im["sim_completion_us"]
    out["ratio_difference"] = out["sim_ratio"] / out["packet_level_ratio"] - 1.0
    return out


def main(argv: list[str] | None = None) -> int:
    """Print the comparison (JSON)."""
    ap = argparse.ArgumentParser(prog="python -m icefabric.experiment.versus", description=__doc__)
    ap.add_argument("results", help="results.json of icectl experiment run")
    args = ap.parse_args(argv)
    try:
        out = compare(args.results)
    except (VersusError, OSError) as e:
        sys.stderr.write(f"versus: {str(e).splitlines()[0] if str(e) else type(e).__name__}\n")
        return 2
    sys.stdout.write(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
