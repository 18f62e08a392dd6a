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
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from icefabric.control.ccl.job import parse_job
from icefabric.control.fabric import FabricOptions
from icefabric.control.topology import Topology
from icefabric.experiment.options import ice_overhead_for
from icefabric.experiment.results import mode_paths
from icefabric.sim.config import config_for
from icefabric.sim.engine import Simulator
from icefabric.sim.network import Routes, SimNetwork, route
from icefabric.sim.workload import Workload, workload_from_jobs
from icefabric.topo.spec import Defaults, TopologySpec, parse_topology
from icefabric.traffic.modes import MODES

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


def compare(results_path: str | Path) -> dict[str, Any]:
    """Run the simulator on the experiment of ``results_path``; both sides' figures."""
    source = str(results_path)
    from icefabric.experiment.results import MAX_RESULTS_BYTES
    from icefabric.files import DataFileError, JsonError, parse_json, read_text

    try:  # bounded by bytes read, a regular file only, JSON of bounded nesting and integers
        data = parse_json(read_text(results_path, limit=MAX_RESULTS_BYTES, what="a results.json"))
    except DataFileError as e:
        raise VersusError(str(e).splitlines()[0]) from None
    except JsonError as e:
        raise VersusError(f"{source}: not valid JSON: {e}") from None
    try:
        exp = data["experiment"]
        modes = {m["mode"]: m for m in data["modes"]}
        scale = float(exp["rates"]["scale"])
        mtu = int(exp["rates"]["mtu_bytes"])
        slices = int(exp.get("slices") or 1)
        delay = exp["rates"].get("link_delay_us")
        control_delay = float(exp["rates"].get("control_delay_us", 0.0))
        sample_n = int(exp.get("ice", {}).get("sample_n", 1))  # results from before the sampling: 1
        sample_gap = float(exp.get("ice", {}).get("sample_gap", 0.0))  # before the floor: none
        spec = _scaled(
            parse_topology(exp["topology"], source),
            scale,
            None if delay is None else float(delay),
        )
        job = parse_job(exp["job"], source)
    except (KeyError, TypeError) as e:
        raise VersusError(f"{source}: missing or malformed field {e}") from None
    for m in COMPARED:
        if m not in modes or not modes[m].get("ok"):
            raise VersusError(f"{source}: modes: no successful {m!r} run")
    topo = Topology(spec)
    w = workload_from_jobs([job], slices=slices)
    line = max(topo.capacity) * 8
    dt = 2 * mtu * 8 / line * 1e6  # two packet times
    # ECN as the controller programs ice.p4 (packets; Pmax = 1 / (mask + 1)), per 100G here
    ecn = FabricOptions()
    per100 = mtu / 1e3 * 100e9 / line
    out: dict[str, Any] = {"experiment": exp["name"], "modes": {}}
    for mode in COMPARED:
        routing = MODES[mode].sim_routing
        cfg = config_for(
            MODES[mode],
            dt_us=dt,
            mtu_bytes=mtu,
            ecn_kmin_kb=ecn.ecn_kmin * per100,
            ecn_kmax_kb=ecn.ecn_kmax * per100,
            ecn_pmax=1.0 / (ecn.ecn_pmax_mask + 1),
            switch_latency_us=0.0,  # virtual-time switches forward in no time
            # caps as the packet level delivered them: one control delay late, stretched by
            # 1 / scale like every time constant, the first ones ahead when the job was known
            cap_delay_us=control_delay / scale,
            caps_ahead=bool(modes["ice"].get("engine", {}).get("caps_ahead", True)),
            # ICE's shim, INT records and feedback frames take their share of the fabric links
            wire_overhead=(
                ice_overhead_for(spec, mtu, sample_n, sample_gap) if MODES[mode].int_on else 0.0
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
            "sim_busbw_over_bound": res.collectives[0].busbw_over_bound,
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
