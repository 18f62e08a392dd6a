"""The real-time engine of the experiment runner: one mode in Mininet (root).

Per mode, in a fresh private directory: the topology (on free gRPC ports) comes up in Mininet
with one switch process per switch, every egress queue drained at the port's link rate x
``rates.scale``. The target decides which process and how the rate is set:

* ``embedded`` (default): ``ice-switch`` with ``--queue-rate-bps PORT:BPS``;
* ``bmv2``: BMv2's ``simple_switch_grpc``, each in a network namespace of its own, running
  ``ice.p4`` as compiled by p4c-bm2-ss (built on demand into a cache, ``target/bmv2.py``); once
  the pipeline is pushed, every port's queue rate is set in packets/s through
  ``simple_switch_CLI set_queue_rate`` (``queue_pps``, below).

BMv2 drains an egress queue in packets, not bytes (``set_queue_rate``): a link of B bytes/s
becomes ``B / (mtu_bytes + 58)`` packets/s, 58 being the RoCEv2 headers (Ethernet 14, IPv4 20,
UDP 8, BTH 12, ICRC 4) of a full data frame as the hosts send it. Smaller frames (ACKs, CNPs,
INT feedback) therefore take a whole packet's share, and the bytes ice.p4 adds in the fabric
(8-byte shim, INT records) are not counted.

A :class:`Controller` in this process connects over P4Runtime, pushes ``p4src/ice.p4`` and base
forwarding in the mode's load-balancing mode; for planned modes it plans the job and listens on
a Unix-socket agent channel, where the hosts report their real flow keys (installed as the
planned paths) and get their caps. Every host runs ``python -m icefabric.traffic.host`` with the
workload schedule (its own share), the mode's rate algorithm and a common ``--start-at``; its
``--stats`` file gives every message's post and arrival time on its own clock, lined up on the
wall clock through the clock origin it records. Switch port counters (read over P4Runtime
before and after) give the per-link bytes; sampled INT reports give paths and queue depths.
Teardown (always): hosts killed, controller stopped, ``net.stop()`` (switch processes and
interfaces), directory removed.

Limits: links have no delay (``rates.link_delay_us`` is not emulated); with ``embedded``, one
rate per port number across switches (``--queue-rate-bps`` is one option list for every
switch; BMv2 sets each switch's ports on their own); in planned modes the controller's caps
reach the agents (``ice-paths`` runs with caps at the full max-min share, target 1.0; ICE
with ``options.cap_target``, as in virtual time: the whole link less ICE's own bytes, its
hosts' agents anchored on their caps; INT sampling 1 in ``ice.sample_n`` without the time floor,
the hosts' base RTT being their own scaled default);
real-time switches and Python hosts forward a few thousand packets/s in all, so keep
``rates.scale`` small (e.g. 5e-5: 100 Gbit/s -> 5 Mbit/s).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from icefabric.control.planner.planner import DEFAULT_WORK_BUDGET
from icefabric.experiment.config import Experiment, Mode
from icefabric.experiment.measures import Observed
from icefabric.experiment.options import cap_target, mode_options
from icefabric.experiment.runner import Progress
from icefabric.files import parse_json
from icefabric.topo.spec import TopologySpec
from icefabric.traffic.roce import HEADER_BYTES, ICRC_BYTES
from icefabric.traffic.workload import Schedule, WorkloadExecutor
from icefabric.waiting import poll_until

log = logging.getLogger(__name__)

READY_S_PER_HOST = 2.5  # hosts start together at launch + 8 s + this per host (imports, QPs)
REPORT_EVERY_N = 16
TARGETS = ("embedded", "bmv2")
FRAME_OVERHEAD_BYTES = HEADER_BYTES + ICRC_BYTES  # 58: a full data frame = mtu_bytes + this


class MininetEngineError(RuntimeError):
    """The real-time engine cannot run here (not root, Mininet missing, rates it cannot set)."""


def _free_ports(count: int) -> list[int]:
    socks, ports = [], []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


def port_rates(spec: TopologySpec, scale: float) -> dict[tuple[str, int], float]:
    """Bits/s of every switch egress port: its link's rate x ``scale``."""
    rates: dict[tuple[str, int], float] = {}
    for ln in spec.links:
        rate = spec.link_rate(ln) * 1e9 * scale
        rates[(ln.a.node, ln.a.port)] = rate
        rates[(ln.b.node, ln.b.port)] = rate
    for h in spec.hosts:
        rates[(h.leaf, h.port)] = spec.host_rate(h) * 1e9 * scale
    return rates


def queue_rate_args(spec: TopologySpec, scale: float) -> list[str]:
    """``--queue-rate-bps PORT:BPS`` for every switch port (MininetEngineError when one port
    number needs different rates on different switches)."""
    rates: dict[int, tuple[float, str]] = {}
    for (sw, port), bps in sorted(port_rates(spec, scale).items()):
        old, where = rates.setdefault(port, (bps, sw))
        if abs(old - bps) > 1e-6 * bps:
            raise MininetEngineError(
                f"{spec.name}: port {port} runs at {old / 1e9 / scale:g} ({where}) and "
                f"{bps / 1e9 / scale:g} Gbit/s ({sw}); the mininet engine's embedded target "
                "sets one rate per port number (--target bmv2 sets each switch's)"
            )
    args: list[str] = []
    for port, (bps, _) in sorted(rates.items()):
        args += ["--queue-rate-bps", f"{port}:{round(bps)}"]
    return args


def frame_bytes(mtu_bytes: int) -> int:
    """The full data frame the pps rates assume: RoCEv2 headers + ``mtu_bytes`` payload."""
    return mtu_bytes + FRAME_OVERHEAD_BYTES


def queue_pps(bps: float, mtu_bytes: int) -> int:
    """Packets per second that drain ``bps`` bits/s of full data frames (at least 1)."""
    return max(1, round(bps / 8 / frame_bytes(mtu_bytes)))


def queue_rate_commands(spec: TopologySpec, scale: float, mtu_bytes: int) -> dict[str, str]:
    """Per switch, the ``simple_switch_CLI`` lines that set its ports' BMv2 queue rates."""
    out: dict[str, str] = {}
    for (sw, port), bps in sorted(port_rates(spec, scale).items()):
        out[sw] = out.get(sw, "") + f"set_queue_rate {queue_pps(bps, mtu_bytes)} {port}\n"
    return out


class MininetEngine:
    """Runs modes in real time in Mininet (see the module docstring)."""

    def __init__(self, target: str = "embedded") -> None:
        if target not in TARGETS:
            raise MininetEngineError(f"target {target!r}: expected one of {', '.join(TARGETS)}")
        self.target = target
        self._pipeline: Any = None

    def pipeline(self) -> Any:
        """ice.p4 for this engine's target, built on first use (BMv2: p4c-bm2-ss's output from
        the build cache, compiled when missing or stale; Bmv2Unavailable without the tools)."""
        from icefabric.control.p4rt import PipelineConfig
        from icefabric.p4src import ICE_P4

        if self._pipeline is None:
            if self.target == "bmv2":
                from icefabric.target.bmv2 import build_pipeline, check_tools

                check_tools()
                self._pipeline = PipelineConfig.for_bmv2(*build_pipeline(ICE_P4))
            else:
                self._pipeline = PipelineConfig.for_embedded(ICE_P4)
        return self._pipeline

    def run_mode(
        self, exp: Experiment, mode: Mode, schedule: Schedule, progress: Progress
    ) -> Observed:
        """Run ``schedule`` under ``mode`` in a fresh Mininet network."""
        if os.geteuid() != 0:
            raise MininetEngineError("the mininet engine needs root (namespaces, veth pairs)")
        if shutil.which("mnexec") is None:
            raise MininetEngineError("Mininet is not installed (mnexec missing); run make setup")
        from icefabric.control.controller import Controller
        from icefabric.topo.mininet import start_network
        from icefabric.topo.spec import save_topology

        ports = _free_ports(len(exp.topology.switches))
        spec = replace(
            exp.topology,
            switches=tuple(
                replace(s, grpc_port=p) for s, p in zip(exp.topology.switches, ports, strict=True)
            ),
        )
        bmv2 = self.target == "bmv2"
        switch_args = [] if bmv2 else queue_rate_args(spec, exp.rates.scale)
        pipeline = self.pipeline()
        work = Path(tempfile.mkdtemp(prefix=f"ice-{exp.name}-{mode.name.replace('+', '-')}-"))
        net = None
        ctl = None
        procs: dict[str, subprocess.Popen[bytes]] = {}
        try:
            topo_file = work / "topo.yaml"
            save_topology(spec, topo_file)
            (work / "schedule.json").write_text(json.dumps(schedule.to_dict()))
            net = start_network(
                spec, target=self.target, log_dir=str(work), switch_args=switch_args
            )
            options = mode_options(exp, mode, report_every_n=REPORT_EVERY_N, target=self.target)
            ctl = Controller(
                spec,
                pipeline,
                options=options,
                probe_interval_s=0,
                # as the virtual engine: ICE's caps fill links less ICE's own bytes (anchored
                # agents send at their caps), every other mode's the whole link
                rate_target=cap_target(exp, mode),
                plan_work_budget=DEFAULT_WORK_BUDGET,  # same plan under any load
            )
            ctl.start()
            if not ctl.active:
                raise RuntimeError("the controller did not become primary on every switch")
            if bmv2:  # after the pipeline push, so no config swap can reset them
                for sw, lines in queue_rate_commands(
                    spec, exp.rates.scale, exp.rates.mtu_bytes
                ).items():
                    net.get(sw).cli(lines)
            agents = None
            if mode.planned:
                ctl.add_job(exp.job)
                agents = work / "agents.sock"
                ctl.agents.listen(agents)
            before = ctl.stats()
            procs, start_at = self._start_hosts(exp, mode, spec, net, work, topo_file, agents)
            error = self._wait(exp, mode, procs, work, progress, len(schedule.messages))
            after = ctl.stats()
            reports = ctl.reports.recent(None)
            return self._observe(
                exp, mode, schedule, spec, work, start_at, before, after, reports, error
            )
        finally:
            for p in procs.values():
                if p.poll() is None:
                    p.kill()
                    p.wait()
            if ctl is not None:
                ctl.stop()
            if net is not None:
                net.stop()
            shutil.rmtree(work, ignore_errors=True)

    def _start_hosts(
        self,
        exp: Experiment,
        mode: Mode,
        spec: TopologySpec,
        net: Any,
        work: Path,
        topo_file: Path,
        agents: Path | None,
    ) -> tuple[dict[str, subprocess.Popen[bytes]], float]:
        start_at = time.time() + 8.0 + READY_S_PER_HOST * len(spec.hosts)
        procs: dict[str, subprocess.Popen[bytes]] = {}
        for h in spec.hosts:
            node = net.get(h.name)
            cmd = [sys.executable, "-m", "icefabric.traffic.host", "--topology", str(topo_file)]
            cmd += ["--host", h.name, "--iface", node.defaultIntf().name]
            cmd += ["--schedule", str(work / "schedule.json"), "--kind", mode.rate]
            cmd += ["--rate-scale", repr(exp.rates.scale), "--mtu", str(exp.rates.mtu_bytes)]
            cmd += ["--seed", str(exp.seed), "--start-at", repr(start_at), "--linger", "1"]
            cmd += ["--duration", repr(exp.limits.wall_s), "--stats", str(work / f"{h.name}.json")]
            cmd += ["-v"]
            cmd += ["--controller", str(agents) if agents is not None else "off"]
            out = (work / f"{h.name}.log").open("wb")
            procs[h.name] = node.popen(cmd, stdout=out, stderr=subprocess.STDOUT)
            out.close()
        waiting = set(procs)

        def all_ready() -> bool:  # every host (QPs open, keys reported) before start_at
            for name in list(waiting):
                text = (work / f"{name}.log").read_text(errors="replace")
                if " ready on " in text:
                    waiting.discard(name)
                elif procs[name].poll() is not None:
                    raise RuntimeError(f"host {name} exited: {text.strip().splitlines()[-1:]}")
            return not waiting

        if not poll_until(all_ready, start_at - time.time(), 0.1):
            raise RuntimeError(f"hosts not ready by the common start time: {sorted(waiting)}")
        return procs, start_at

    def _wait(
        self,
        exp: Experiment,
        mode: Mode,
        procs: dict[str, subprocess.Popen[bytes]],
        work: Path,
        progress: Progress,
        total: int,
    ) -> str | None:

        def all_exited() -> bool:
            done = sum(1 for p in procs.values() if p.poll() is not None)
            progress(mode.name, done / max(len(procs), 1) * 0.99)
            return done == len(procs)

        if not poll_until(all_exited, exp.limits.wall_s + 30.0, 0.2):
            return f"wall time limit {exp.limits.wall_s:g} s reached"
        progress(mode.name, 1.0)
        bad = {
            name: (work / f"{name}.log").read_text(errors="replace").strip().splitlines()[-1:]
            for name, p in procs.items()
            if p.returncode != 0
        }
        return f"host(s) failed: {bad}" if bad else None

    def _observe(
        self,
        exp: Experiment,
        mode: Mode,
        schedule: Schedule,
        spec: TopologySpec,
        work: Path,
        start_at: float,
        before: dict[str, Any],
        after: dict[str, Any],
        reports: list[dict[str, Any]],
        error: str | None,
    ) -> Observed:
        ex = WorkloadExecutor(schedule, lambda m, t: None)
        cnps = marks = packets = losses = feedback = 0
        for h in spec.hosts:
            path = work / f"{h.name}.json"
            if not path.exists():
                error = error or f"host {h.name} wrote no stats"
                continue
            st = parse_json(path.read_text())  # bounded nesting and integers
            shift = (float(st["clock_origin_unix"]) - start_at) * 1e6  # onto start_at = 0
            for k, v in st.get("posted_us", {}).items():
                ex.posted_us[int(k)] = float(v) + shift
            for k, v in st.get("arrived_us", {}).items():
                ex.arrived_us[int(k)] = float(v) + shift
            for f in st["rx"]:
                cnps += int(f["cnps_sent"])
                marks += int(f["ecn_marks"])
                losses += int(f["psn_gap_losses"])
            for f in st["tx"]:
                packets += int(f["packets_sent"])
                feedback += int(f["feedback_received"])
        for m in schedule.messages:  # same-host messages arrive where they are posted
            if m.flow_id is None and m.id in ex.posted_us:
                ex.arrived_us.setdefault(m.id, ex.posted_us[m.id])
        names = {s.switch_id: s.name for s in spec.switches}
        link_bytes: dict[str, int] = {}
        link_bps: dict[str, float] = {}
        peer = {}
        for ln in spec.links:
            peer[(ln.a.node, ln.a.port)] = (ln.b.node, spec.link_rate(ln))
            peer[(ln.b.node, ln.b.port)] = (ln.a.node, spec.link_rate(ln))
        for h in spec.hosts:
            peer[(h.leaf, h.port)] = (h.name, spec.host_rate(h))
        drops: dict[str, int] = {}
        for sw, st in after.items():
            old = {p["port"]: p for p in before.get(sw, {}).get("ports", [])}
            for p in st.get("ports", []):
                other = peer.get((sw, p["port"]))
                if other is None:
                    continue
                name = f"{sw}>{other[0]}"
                link_bytes[name] = p["tx_bytes"] - old.get(p["port"], {}).get("tx_bytes", 0)
                link_bps[name] = other[1] * 1e9 * exp.rates.scale
            old_drops = {d["reason"]: d["packets"] for d in before.get(sw, {}).get("drops", [])}
            for d in st.get("drops", []):
                k = d["packets"] - old_drops.get(d["reason"], 0)
                if k:
                    drops[d["reason"]] = drops.get(d["reason"], 0) + k
        hist: dict[int, int] = {}
        paths: dict[str, list[str]] = {}
        for rep in reports:
            for hop in rep["hops"]:
                hist[int(hop["qdepth"])] = hist.get(int(hop["qdepth"]), 0) + 1
            fid = rep.get("flow")
            if fid and fid not in paths:
                paths[fid] = [
                    names.get(h["switch_id"], str(h["switch_id"])) for h in reversed(rep["hops"])
                ]
        if error is None and not ex.done:
            error = f"{len(schedule.messages) - len(ex.arrived_us)} message(s) never arrived"
        return Observed(
            mode=mode.name,
            executor=ex,
            ok=error is None,
            error=error,
            end_us=max(ex.arrived_us.values(), default=0.0),
            link_bytes=link_bytes,
            link_bps=link_bps,
            queue_hist=hist,
            drops=drops,
            cnps=cnps,
            ecn_marks=marks,
            packets=packets,
            losses=losses,
            paths=paths,
            extra={"feedback_received": feedback, "int_reports": len(reports)},
        )
