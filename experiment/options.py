"""Base-forwarding options of one mode, shared by both engines (virtual time and Mininet)."""

from __future__ import annotations

from icefabric.control.congestion.allocator import DEFAULT_TARGET
from icefabric.control.fabric import ALL_PATH_KINDS, FabricOptions
from icefabric.experiment.config import Experiment, Mode
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


def mode_options(exp: Experiment, mode: Mode, *, report_every_n: int) -> FabricOptions:
    """The controller's base forwarding for ``mode``: its load-balancing mode; INT and feedback
    only where the mode's rate algorithm reads INT (``Mode.int_on``); INT reports sampled 1 in ``report_every_n`` packets (to learn
    each flow's path); the flowlet gap stretched by 1/scale like every time constant."""
    ice = mode.int_on
    n = exp.ice.sample_n
    return FabricOptions(
        mode=mode.lb_mode,
        # INT only where the rate control reads it: a baseline (DCQCN) fabric carries no INT,
        # and 44-80 bytes of records per packet would overload its links by 1-2 % and mark
        # ECN on a single flow (planned paths + DCQCN: 59.5 % of the bound with INT, 97.5 %
        # without, on the default preset in virtual time)
        int_kinds=ALL_PATH_KINDS if ice else (),
        int_sample_every_n=n if ice else 1,
        feedback_every_n=1 if ice else 0,  # every sampled packet, and only those
        # reports come from sampled packets only: 1 in report_every_n packets all the same
        report_every_n=max(1, report_every_n // n) if ice else report_every_n,
        flowlet_timeout_us=min(round(FLOWLET_TIMEOUT_US / exp.rates.scale), 2**32 - 1),
    )


# A feedback frame's headers before its hop records: Ethernet 14 + IPv4 20 + UDP 8 + feedback 36.
FEEDBACK_HEADER_BYTES = 14 + 20 + 8 + ICE_FEEDBACK_BYTES


def longest_path_switches(spec: TopologySpec) -> int:
    """Switches on the fabric's longest host-to-host path (leaf-spine: 3)."""
    tiers = max((s.tier for s in spec.switches), default=0)
    return 2 * tiers + 1


def ice_wire_overhead(
    frame_bytes: int, path_switches: int, *, int_every_n: int, feedback_every_n: int
) -> float:
    """ICE's bytes per data-frame byte on the most loaded fabric link of a path of
    ``path_switches`` switches: the 8-byte shim on every data frame, the hop records the
    switches before the last one pushed (on 1 in ``int_every_n`` frames), and, where the
    reverse traffic is as heavy as the forward (a ring), one feedback frame with a record per
    switch for every ``feedback_every_n`` frames."""
    records = max(path_switches - 1, 0)
    per_frame = ICE_SHIM_BYTES + records * INT_HOP_BYTES / max(int_every_n, 1)
    if feedback_every_n > 0:
        per_frame += (FEEDBACK_HEADER_BYTES + path_switches * INT_HOP_BYTES) / feedback_every_n
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
    return 1.0 / (1.0 + ice_overhead_for(exp.topology, exp.rates.mtu_bytes, exp.ice.sample_n))


def ice_overhead_for(spec: TopologySpec, mtu_bytes: int, sample_n: int) -> float:
    """:func:`ice_wire_overhead` of the ICE mode's options (INT and feedback on 1 in
    ``sample_n`` packets) on the longest path of ``spec`` with ``mtu_bytes`` of payload per frame (the simulator's model of
    ICE's bytes on the fabric links too: ``SimConfig.wire_overhead``)."""
    return ice_wire_overhead(
        HEADER_BYTES + mtu_bytes + ICRC_BYTES,
        longest_path_switches(spec),
        int_every_n=sample_n,
        feedback_every_n=sample_n,
    )


def ice_params(exp: Experiment) -> IceParams:
    """ICE's end-side constants for ``exp`` (its ``ice:`` knobs over the defaults)."""
    k = exp.ice
    return IceParams(anchor=k.anchor, derived_ai=k.derived_ai, eta=k.eta)
