"""Base-forwarding options of one mode, shared by both engines (virtual time and Mininet)."""

from __future__ import annotations

from icefabric.control.congestion.allocator import DEFAULT_TARGET
from icefabric.control.fabric import ALL_PATH_KINDS, FabricOptions
from icefabric.control.fabric_targets import for_target
from icefabric.experiment.config import Experiment, Mode, run_topology
from icefabric.p4src.ice_p4 import ETHERNET_BYTES, IPV4_BYTES, UDP_BYTES
from icefabric.topo.spec import TopologySpec
from icefabric.traffic.packets import ICE_FEEDBACK_BYTES, ICE_SHIM_BYTES, INT_HOP_BYTES
from icefabric.traffic.rate import IceParams
from icefabric.traffic.roce import HEADER_BYTES, ICRC_BYTES

FLOWLET_TIMEOUT_US = 100  # FabricOptions' default, for links at the spec's rates
# ICE: INT records and feedback for 1 in N data packets of a flow (``ice: sample_n``, default
# in experiment/config.py IceKnobs): the first leaf samples (ice.p4's int_sampling), every
# sampled packet makes feedback and nothing else does, so no record is carried that is not
# read.  Each feedback packet is a separate ~190-byte frame on the reverse path, and the
# tx-rate term of HPCC's per-hop utilisation is measured between two feedbacks, so over few
# packets it is dominated by whole-packet quantisation (measured before the sampling, feedback
# every Nth packet with INT on all: ICE's busbw / bound on the default preset 0.81 with N=1,
# 0.87 with 2, 0.89 with 4, 0.91 with 8).


def mode_options(
    exp: Experiment,
    mode: Mode,
    *,
    report_every_n: int,
    base_rtt_us: float | None = None,
    target: str = "embedded",
) -> FabricOptions:
    """The controller's base forwarding for ``mode``: its load-balancing mode; INT and feedback
    only where the mode's rate algorithm reads INT (``Mode.int_on``), on 1 in ``sample_n``
    packets of a flow and, given the fabric's ``base_rtt_us`` (ICE's T), at least once per
    ``sample_gap`` x T; INT reports sampled 1 in ``report_every_n`` packets (to learn
    each flow's path); the flowlet gap stretched by 1/scale like every time constant.
    As the switches' ``target`` needs them (``fabric_targets.for_target``: on the embedded
    one the last hop's feedback copies leave at the feedback priority, as CNPs do)."""
    ice = mode.int_on
    n = exp.ice.sample_n
    gap = 0
    if ice and base_rtt_us is not None and exp.ice.sample_gap > 0:
        gap = max(1, min(round(exp.ice.sample_gap * base_rtt_us), 2**31 - 1))
    options = FabricOptions(
        mode=mode.lb_mode,
        # INT only where the rate control reads it: a baseline (DCQCN) fabric carries no INT,
        # and 44-80 bytes of records per packet would overload its links by 1-2 % and mark
        # ECN on a single flow (planned paths + DCQCN: 59.5 % of the bound with INT, 97.5 %
        # without, on the default preset in virtual time)
        int_kinds=ALL_PATH_KINDS if ice else (),
        int_sample_every_n=n if ice else 1,
        int_sample_max_gap_us=gap,
        feedback_every_n=1 if ice else 0,  # every sampled packet, and only those
        # reports come from sampled packets only: 1 in report_every_n packets all the same
        report_every_n=max(1, report_every_n // n) if ice else report_every_n,
        flowlet_timeout_us=min(round(FLOWLET_TIMEOUT_US / exp.rates.scale), 2**32 - 1),
    )
    return for_target(options, target)


# A feedback frame's headers before its hop records: Ethernet 14 + IPv4 20 + UDP 8 + feedback 36.
FEEDBACK_HEADER_BYTES = ETHERNET_BYTES + IPV4_BYTES + UDP_BYTES + ICE_FEEDBACK_BYTES


def longest_path_switches(spec: TopologySpec) -> int:
    """Switches on the fabric's longest host-to-host path (leaf-spine: 3)."""
    tiers = max((s.tier for s in spec.switches), default=0)
    return 2 * tiers + 1


def ice_wire_overhead(
    frame_bytes: int,
    path_switches: int,
    *,
    int_every_n: int,
    feedback_every_n: int,
    gap_frames: float = 0.0,
) -> float:
    """ICE's bytes per data-frame byte on the most loaded fabric link of a path of
    ``path_switches`` switches: the 8-byte shim on every data frame, the hop records the
    switches before the last one pushed (on 1 in ``int_every_n`` frames, or on 1 in
    ``gap_frames`` where the time floor samples more often: the frames a flow at the line rate
    sends in the max gap), and, where the reverse traffic is as heavy as the forward (a ring),
    one feedback frame with a record per switch for every sampled frame (``feedback_every_n``
    of them).  A link carrying k slower flows gets up to k floor samples per gap instead."""
    records = max(path_switches - 1, 0)
    floor = max(gap_frames, 1.0) if gap_frames > 0 else float("inf")
    per_frame = ICE_SHIM_BYTES + records * INT_HOP_BYTES / min(max(int_every_n, 1), floor)
    if feedback_every_n > 0:
        per_frame += (FEEDBACK_HEADER_BYTES + path_switches * INT_HOP_BYTES) / min(
            feedback_every_n, floor
        )
    return per_frame / frame_bytes


def cap_target(exp: Experiment, mode: Mode) -> float:
    """The link utilisation the controller's caps fill (``RateAllocator.target``): for ICE,
    the whole link less ICE's own bytes on it, 1 / (1 + :func:`ice_wire_overhead`), so that
    a flow at its cap (anchored, traffic/README.md) leaves no link over its capacity; 1.0 for
    modes without ICE's shim and INT."""
    if not mode.int_on:
        return 1.0
    if not exp.ice.anchor:
        return DEFAULT_TARGET  # HPCC's rule everywhere: its headroom in the caps too
    overhead = ice_overhead_for(
        run_topology(exp),
        exp.rates.mtu_bytes,
        exp.ice.sample_n,
        exp.ice.sample_gap,
        rate_scale=exp.rates.scale,
    )
    return 1.0 / (1.0 + overhead)


def ice_overhead_for(
    spec: TopologySpec,
    mtu_bytes: int,
    sample_n: int,
    sample_gap: float = 0.0,
    *,
    rate_scale: float = 1.0,
) -> float:
    """:func:`ice_wire_overhead` of the ICE mode's options (INT and feedback on 1 in
    ``sample_n`` packets, and at least once per ``sample_gap`` base RTTs) on the longest path of
    ``spec`` (as an engine runs it: its delays, its rates x ``rate_scale``) with ``mtu_bytes``
    of payload per frame (the simulator's model of ICE's bytes on the fabric links too:
    ``SimConfig.wire_overhead``)."""
    from icefabric.experiment.virtual_fabric import base_rtt_us

    frame = HEADER_BYTES + mtu_bytes + ICRC_BYTES
    gap_frames = 0.0
    if sample_gap > 0:
        rates = [spec.link_rate(ln) for ln in spec.links] + [spec.host_rate(h) for h in spec.hosts]
        line_bps = (min(rates) if rates else 1.0) * 1e9 * rate_scale
        # the frames (with their FCS) a line-rate flow sends in the gap of sample_gap x T
        t_us = base_rtt_us(spec, frame + 4, rate_scale)
        gap_frames = sample_gap * t_us * 1e-6 * line_bps / 8 / (frame + 4)
    return ice_wire_overhead(
        frame,
        longest_path_switches(spec),
        int_every_n=sample_n,
        feedback_every_n=sample_n,
        gap_frames=gap_frames,
    )


def ice_params(exp: Experiment) -> IceParams:
    """ICE's end-side constants for ``exp`` (its ``ice:`` knobs over the defaults; the data
    frame on the wire, headers and FCS included, for the anchored regime's burst allowance)."""
    k = exp.ice
    frame = HEADER_BYTES + exp.rates.mtu_bytes + ICRC_BYTES + 4
    return IceParams(anchor=k.anchor, derived_ai=k.derived_ai, eta=k.eta, frame_bytes=frame)
