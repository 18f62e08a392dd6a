"""The virtual-time engine of the experiment runner: one mode on a fresh in-process fabric.

Per mode: a :class:`~icefabric.experiment.virtual_fabric.VirtualFabric` (embedded switches running
``p4src/ice.p4`` on one ManualClock, links at the topology's rates x ``rates.scale``, hosts =
endpoints + agents with the mode's rate algorithm, seeded QP numbering) and a
:class:`~icefabric.control.controller.Controller` connected to it over real P4Runtime, which
pushes the pipeline, installs base forwarding in the mode's load-balancing mode (ECN marking on
every port), and for planned modes plans the job and installs its paths for the flows' real
keys (what the agents report); with caps it pushes the max-min fair rates to the agents before
the first message. Then the workload's executor posts messages on the endpoints and the event
loop runs until the last message arrived (or the experiment's limits). Everything the engine
counted becomes a :class:`~icefabric.experiment.measures.Observed`.
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from collections.abc import Callable
from typing import Any

from icefabric.control.flowkey import FlowKey
from icefabric.control.p4rt import PipelineConfig
from icefabric.control.planner.planner import DEFAULT_WORK_BUDGET
from icefabric.experiment.config import Experiment, Mode, run_topology
from icefabric.experiment.measures import Observed
from icefabric.experiment.options import cap_target, ice_params, mode_options
from icefabric.experiment.phase_caps import PhaseCaps
from icefabric.experiment.runner import Progress
from icefabric.p4src import ice_p4 as n
from icefabric.traffic.workload import Message, Schedule, WorkloadExecutor

log = logging.getLogger(__name__)

STEP_US = 2000  # the loop checks limits and reports progress every 2 ms of virtual time
REPORT_EVERY_N = 64  # sampled INT reports (to learn each flow's path), 1 in N packets
# A RoCEv2 CNP on the wire: Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + 16 reserved + ICRC 4.
CNP_FRAME_BYTES = 74
BACKGROUND_TAG = 1 << 30  # message tags of background flows (the job's are its message ids)


class VirtualEngine:
    """Runs modes in virtual time (the pipeline is compiled once per engine)."""

    def __init__(self) -> None:
        self._pipeline: PipelineConfig | None = None

    def pipeline(self) -> PipelineConfig:
        """ice.p4 for the embedded target (compiled on first use)."""
        if self._pipeline is None:
            from icefabric.p4src import ICE_P4

            self._pipeline = PipelineConfig.for_embedded(ICE_P4)
        return self._pipeline

    def run_mode(
        self, exp: Experiment, mode: Mode, schedule: Schedule, progress: Progress
    ) -> Observed:
        """Run ``schedule`` under ``mode`` on a fresh fabric (see the module docstring)."""
        from icefabric.control.controller import Controller
        from icefabric.experiment.virtual_fabric import VirtualConfig, VirtualFabric

        spec = run_topology(exp)  # delays stretched like the rates
        cfg = VirtualConfig(
            rate_scale=exp.rates.scale,
            mtu=exp.rates.mtu_bytes,
            kind=mode.rate,
            seed=exp.seed,
            reorder=mode.balance == "spray",  # sprayed packets arrive out of PSN order
            ice=ice_params(exp),
        )
        with VirtualFabric(spec, cfg) as fab:
            options = mode_options(
                exp, mode, report_every_n=REPORT_EVERY_N, base_rtt_us=fab.base_rtt_us
            )
            ctl = Controller(
                spec,
                self.pipeline(),
                addresses=fab.addresses,
                options=options,
                probe_interval_s=0,
                plan_work_budget=DEFAULT_WORK_BUDGET,  # same plan under any load
                rate_target=cap_target(exp, mode),
            )
            ctl.start()
            try:
                return self._run(exp, mode, schedule, progress, fab, ctl)
            finally:
                ctl.stop()

    def _run(
        self,
        exp: Experiment,
        mode: Mode,
        schedule: Schedule,
        progress: Progress,
        fab: Any,
        ctl: Any,
    ) -> Observed:
        if not ctl.active:
            raise RuntimeError("the controller did not become primary on every switch")
        keys: dict[str, Any] = {}
        first: dict[str, Message] = {}  # each network flow's first message
        for x in schedule.messages:
            if x.flow_id is not None:
                first.setdefault(x.flow_id, x)

        def open_flows(job: str | None) -> None:
            """Every network flow is one QP, opened when its job starts: up front (``job``
            None: the jobs that start with the run), or when ``job`` arrives later."""
            for fid in schedule.flow_bytes():  # in this order: the QPs' numbers follow it
                m = first[fid]
                if m.job == job or (job is None and m.job not in exp.job_starts):
                    keys[fid] = fab.open_flow(m.src_host, m.dst_host, job=m.job, flow_id=fid)

        open_flows(None)
        if mode.planned:  # a job that arrives later is learnt when it arrives (arrive below)
            for job, _ in exp.jobs:
                if job.name not in exp.job_starts:
                    ctl.add_job(job)
            install_real_keys(ctl, fab)
        delay = exp.rates.run_control_delay_us()
        # background flows: opened after the controller learnt the job's keys, so it never
        # plans or caps them (ice.p4's flowlet / ECMP fallback places them)
        # of no job: what an agent opens for traffic outside any CCL job
        bg_keys = [
            fab.open_flow(b.src, b.dst, flow_id=f"background/{i}")
            for i, b in enumerate(exp.background)
        ]
        bg_done: dict[int, float] = {}
        caps = (
            PhaseCaps(ctl, fab, schedule, exp.rates.scale, delay, starts=exp.ice.starts)
            if mode.caps
            else None
        )
        seen = _SeenPaths({s.switch_id: s.name for s in spec_switches(exp)}, keys)
        paths = seen.paths

        def post(m: Message, now_us: float) -> None:
            assert m.flow_id is not None  # the executor keeps same-host messages to itself
            if caps is not None:
                caps.posted(m)  # a phase starting: its caps go out before its first packet
            fab.post(keys[m.flow_id], m.nbytes, m.id)

        def arrived(host: str, key: Any, tag: int, nbytes: int, now: int) -> None:
            if tag >= BACKGROUND_TAG:
                bg_done[tag - BACKGROUND_TAG] = float(now)
                return
            ex.on_message(tag, float(now))
            if caps is not None:
                caps.arrived(tag)

        ex = WorkloadExecutor(schedule, post, held=frozenset(exp.job_starts))
        specs = {job.name: job for job, _ in exp.jobs}

        def arrive(name: str) -> None:
            """A job arrives mid-run: the controller learns and plans it with the running ones
            (their paths may move), then its first messages leave; its phases' caps follow
            when they start, a control delay later (PhaseCaps.posted)."""
            open_flows(name)
            seen.by_key = {k: fid for fid, k in keys.items()}
            if mode.planned:
                ctl.add_job(specs[name])
                install_real_keys(ctl, fab)
            ex.release(name, float(fab.now_us))

        fab.on_message = arrived
        fab.on_cpu_packet = seen.on_cpu
        if caps is not None and exp.phases_known_ahead:
            # the job was submitted before it runs: its first phases' caps go out one control
            # delay before their first message, so they are in place when it leaves
            caps.ahead({m.phase for m in schedule.messages if not m.deps and m.job not in ex.held})
            fab.run_until(fab.now_us + math.ceil(delay))
        ports0 = {
            k: (p.tx_bytes, dict(p.queue_hist), p.overhead_bytes)
            for k, p in fab.port_stats().items()
        }
        drops0 = _sum_drops(fab.drops())
        t0 = fab.now_us
        wall0 = time.monotonic()
        ex.start(float(t0))
        for i, (b, k) in enumerate(zip(exp.background, bg_keys, strict=True)):
            fab.post(k, b.bytes, BACKGROUND_TAG + i)
        error = _drive(
            exp, mode.name, fab, ctl, ex, caps, progress, t0=t0, wall0=wall0, arrive=arrive
        )
        obs = observe(exp, mode, fab, ex, ports0, drops0, paths, error, keys)
        if caps is not None:
            obs.extra["cap_pushes"] = caps.pushes
            obs.extra["control_delay_us"] = delay
            obs.extra["caps_ahead"] = exp.phases_known_ahead
            obs.extra["caps_applied"] = fab.channel.applied
        if exp.background:
            obs.extra["background_done"] = len(bg_done)
            # what the unplanned traffic got while the job ran (it outlasts the job)
            sent = fab.flow_stats()
            obs.extra["background_sent_bytes"] = sum(
                sent[k].bytes_sent for k in bg_keys if k in sent
            )
        if exp.link_down is not None:
            obs.extra["link_down"] = f"{exp.link_down.a}-{exp.link_down.b}"
        if mode.lb_mode == "ecmp" and exp.link_down is None:  # (the model knows no failure)
            obs.extra["ecmp_model"] = ecmp_model_check(
                exp,
                {**keys, **{f"background/{i}": k for i, k in enumerate(bg_keys)}},
                paths,
                ctl.options.use_qp_in_hash,
                fab.flow_stats(),
                obs.link_bytes,
                cnp_bytes=obs.cnps * CNP_FRAME_BYTES,
                int_on=mode.int_on,
            )
        return obs


def _drive(
    exp: Experiment,
    name: str,
    fab: Any,
    ctl: Any,
    ex: WorkloadExecutor,
    caps: PhaseCaps | None,
    progress: Progress,
    *,
    t0: int,
    wall0: float,
    arrive: Callable[[str], None] | None = None,
) -> str | None:
    """Run the fabric until the workload is done (the link-down events at their virtual
    times: the controller told first, the link cut ``drain_us`` later; the jobs that arrive
    later at theirs, ``arrive(name)``); why it stopped early, or None."""
    limit_us = t0 + exp.limits.virtual_ms * 1e3
    total = len(ex.schedule.messages)
    events: list[tuple[float, str, str]] = []
    if exp.link_down is not None:
        ld = exp.link_down
        at = t0 + ld.at_us / exp.rates.scale
        events = [(at, "tell", ""), (at + ld.drain_us / exp.rates.scale, "cut", "")]
    for job_name, start_us in exp.job_starts.items():
        events.append((t0 + start_us / exp.rates.scale, "arrive", job_name))
    events.sort()
    error = None
    while not ex.done:
        while events and fab.now_us >= events[0][0]:
            _, what, job_name = events.pop(0)
            if what == "arrive":
                assert arrive is not None
                arrive(job_name)
                continue
            assert exp.link_down is not None
            if what == "tell":
                ctl.fail_link(exp.link_down.a, exp.link_down.b)
                if caps is not None:
                    caps.push()  # the new plan's fair rates
            else:
                fab.cut_link(exp.link_down.a, exp.link_down.b)
        if fab.now_us >= limit_us:
            error = f"virtual time limit {exp.limits.virtual_ms:g} ms reached with {ex.remaining} message(s) outstanding"
            break
        if time.monotonic() - wall0 > exp.limits.wall_s:
            error = f"wall time limit {exp.limits.wall_s:g} s reached with {ex.remaining} message(s) outstanding"
            break
        nxt = fab.now_us + STEP_US
        if events:
            nxt = min(nxt, max(int(events[0][0]), fab.now_us + 1))
        fab.run_until(nxt)
        progress(name, len(ex.arrived_us) / total)
    progress(name, len(ex.arrived_us) / total)
    return error


class _SeenPaths:
    """The switch path of each flow, from the first INT report that names it (the fabric's
    CPU-port packets)."""

    def __init__(self, names: dict[int, str], keys: dict[str, Any]) -> None:
        self.names = names
        self.by_key = {k: fid for fid, k in keys.items()}
        self.paths: dict[str, list[str]] = {}

    def on_cpu(self, switch: str, data: bytes, now_us: int) -> None:
        """A packet a switch sent to its CPU port: a telemetry report names a flow's path."""
        if len(data) < 5 or data[4] != n.PUNT_REASON_TELEMETRY:
            return
        from icefabric.control.telemetry.reports import decode_report

        try:
            rep = decode_report(data[5:], {"reason": data[4]})
        except Exception:  # a malformed report is counted by nobody here: skip it
            return
        fid = self.by_key.get(
            FlowKey(
                src_ip=rep["src_ip"],
                dst_ip=rep["dst_ip"],
                udp_sport=rep["udp_sport"],
                dst_qp=rep["dst_qp"],
            )
        )
        if fid is not None and fid not in self.paths:
            self.paths[fid] = [
                self.names.get(h["switch_id"], str(h["switch_id"])) for h in reversed(rep["hops"])
            ]


def ecmp_model_check(
    exp: Experiment,
    keys: dict[str, Any],
    paths: dict[str, list[str]],
    use_qp: bool,
    flow_stats: dict[Any, Any],
    link_bytes: dict[str, int],
    cnp_bytes: int,
    int_on: bool = False,
) -> dict[str, Any]:
    """What the one ECMP model (``control/planner/ecmp.py``) predicts for the flows' real keys,
    against what the switches did: each flow's path where INT reports named it, else (the
    baseline runs without INT, like a real ECMP fabric) every fabric link's bytes against the
    bytes of the flows the model puts on it (frames as sent + the 8-byte shim ice.p4 pushes on
    the first hop), within the CNPs' bytes (routed, not hashed) and 1 %."""
    from dataclasses import replace

    from icefabric.control.ccl.demand import Flow, demand_from_job
    from icefabric.control.planner.ecmp import ecmp_paths, model_description
    from icefabric.control.topology import Topology

    topo = Topology(exp.topology)
    flows = [
        replace(f, udp_sport=keys[f.flow_id].udp_sport, qp=keys[f.flow_id].dst_qp)
        for job, _ in exp.jobs
        for f in demand_from_job(job)
        if f.flow_id in keys
    ]
    for i, bg in enumerate(exp.background):  # background flows cross the links too
        k = keys.get(f"background/{i}")
        if k is not None:
            flows.append(
                Flow(
                    flow_id=f"background/{i}",
                    job="background",
                    phase="background",
                    channel=0,
                    src_host=bg.src,
                    dst_host=bg.dst,
                    src_rank=-1,
                    dst_rank=-1,
                    bytes=float(bg.bytes),
                    udp_sport=k.udp_sport,
                    qp=k.dst_qp,
                )
            )
    predicted = ecmp_paths(topo, flows, use_qp_in_hash=use_qp)
    leaf = {h.name: h.leaf for h in exp.topology.hosts}
    match = differ = 0
    want_bytes: dict[str, int] = {}
    predicted_paths: dict[str, list[str]] = {}
    for f in flows:
        src, dst = leaf[f.src_host], leaf[f.dst_host]
        if src == dst:
            continue
        cands = {p.index: p for p in topo.candidate_paths(src, dst)}
        idx = predicted[f.flow_id]
        want = [h.switch for h in cands[idx].hops] if idx in cands else None
        if want is not None:
            predicted_paths[f.flow_id] = want
        st = flow_stats.get(keys[f.flow_id])
        if want is not None and st is not None:
            for a, b in itertools.pairwise(want):
                name = f"{a}>{b}"
                want_bytes[name] = want_bytes.get(name, 0) + st.bytes_sent + 8 * st.packets_sent
        seen = paths.get(f.flow_id)
        if seen is None:
            continue
        if want == seen:
            match += 1
        else:
            differ += 1
    out: dict[str, Any] = {
        "model": model_description(use_qp),
        "flows_checked": match + differ,
        "match": match,
        "differ": differ,
    }
    fabric = {f"{ln.a.node}>{ln.b.node}" for ln in exp.topology.links}
    fabric |= {f"{ln.b.node}>{ln.a.node}" for ln in exp.topology.links}
    off = [
        name
        for name in sorted(fabric)
        if abs(link_bytes.get(name, 0) - want_bytes.get(name, 0))
        > cnp_bytes + 0.01 * want_bytes.get(name, 0)
    ]
    if int_on:  # INT records and feedback frames ride on the links: the paths are checked instead
        fabric, off = set(), []
    out["links_checked"] = len(fabric)
    out["links_off"] = off
    out["predicted_paths"] = dict(sorted(predicted_paths.items()))  # switches, first leaf first
    return out


def spec_switches(exp: Experiment) -> Any:
    """The topology's switches."""
    return exp.topology.switches


def install_real_keys(ctl: Any, fab: Any) -> None:
    """Tell the controller every agent's real flow keys; it installs the planned paths for them."""
    hub = ctl.agents

    def address(host: str) -> str:
        return str(ctl.spec.host(host).address)

    with ctl.lock:
        for name, vh in fab.hosts.items():
            hub.flows.update(name, vh.agent.flow_reports(), ctl.flows, address)
            if hub.flows.rejected.get(name):
                raise RuntimeError(
                    f"controller refused {name}'s flow reports: {hub.flows.rejected[name][0]}"
                )
        hub.install_keys("experiment: real keys of every agent", len(ctl.flows))


def _sum_drops(drops: dict[str, dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for per in drops.values():
        for reason, k in per.items():
            out[reason] = out.get(reason, 0) + k
    return out


def link_names(exp: Experiment) -> dict[tuple[str, int], str]:
    """Directed link name ("a>b") of every switch egress port."""
    spec = exp.topology
    out: dict[tuple[str, int], str] = {}
    for ln in spec.links:
        out[(ln.a.node, ln.a.port)] = f"{ln.a.node}>{ln.b.node}"
        out[(ln.b.node, ln.b.port)] = f"{ln.b.node}>{ln.a.node}"
    for h in spec.hosts:
        out[(h.leaf, h.port)] = f"{h.leaf}>{h.name}"
    return out


def observe(
    exp: Experiment,
    mode: Mode,
    fab: Any,
    ex: WorkloadExecutor,
    ports0: dict[tuple[str, int], tuple[int, dict[int, int], int]],
    drops0: dict[str, int],
    paths: dict[str, list[str]],
    error: str | None,
    keys: dict[str, Any],
) -> Observed:
    """What the fabric counted during the run, as an :class:`Observed`."""
    names = link_names(exp)
    link_bytes: dict[str, int] = {}
    link_bps: dict[str, float] = {}
    link_overhead: dict[str, int] = {}
    hist: dict[int, int] = {}
    for key, p in fab.port_stats().items():
        b0, h0, o0 = ports0.get(key, (0, {}, 0))
        name = names.get(key)
        if name is not None:
            link_bytes[name] = p.tx_bytes - b0
            link_overhead[name] = p.overhead_bytes - o0
            link_bps[name] = p.rate_bps
        for depth, k in p.queue_hist.items():
            d = k - h0.get(depth, 0)
            if d:
                hist[depth] = hist.get(depth, 0) + d
    scale = exp.rates.scale
    for h in exp.topology.hosts:  # host uplinks: what the NICs sent
        link_bps[f"{h.name}>{h.leaf}"] = exp.topology.host_rate(h) * 1e9 * scale
        link_bytes[f"{h.name}>{h.leaf}"] = 0
    stats = fab.flow_stats()
    flow_ids = {k: f for f, k in keys.items()}
    for key, st in stats.items():
        host = fab.host_of_ip(key.src_ip)
        link_bytes[f"{host}>{fab.host(host).leaf}"] += st.bytes_sent
    drops = {
        k: v - drops0.get(k, 0) for k, v in _sum_drops(fab.drops()).items() if v - drops0.get(k, 0)
    }
    # ice.p4 clones every packet at its last hop for a telemetry report and drops the clones it
    # does not sample in egress: not a loss, so not counted with the drops
    discarded = drops.pop("egress_drop", 0)
    return Observed(
        mode=mode.name,
        executor=ex,
        ok=error is None,
        error=error,
        end_us=float(fab.now_us),
        link_bytes=link_bytes,
        link_bps=link_bps,
        link_overhead=link_overhead,
        queue_hist=hist,
        drops=drops,
        cnps=sum(st.cnps_sent for st in stats.values()),
        ecn_marks=sum(st.ecn_marks for st in stats.values()),
        packets=sum(st.packets_sent for st in stats.values()),
        losses=sum(st.psn_gap_losses for st in stats.values()),
        paths=paths,
        flow_rx={
            fid: (st.bytes_received, float(st.first_rx_us), float(st.last_rx_us))
            for key, st in stats.items()
            if (fid := flow_ids.get(key)) is not None
            and st.first_rx_us is not None
            and st.last_rx_us is not None
        },
        extra={
            "feedback_received": sum(st.feedback_received for st in stats.values()),
            "base_rtt_us": round(fab.base_rtt_us, 3),
            "unsampled_report_clones": discarded,
        },
    )
