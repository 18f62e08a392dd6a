"""What a simulation run is configured with: every constant a named field with its unit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from icefabric.traffic.modes import Mode
from icefabric.traffic.rate import RATE_CLASSES, rate_kinds

ROUTINGS = ("ecmp", "ice", "flowlet", "spray")
CONTROLS = (*RATE_CLASSES, "none")  # the rate algorithms registered at import, and none


# Bounds checked before a run allocates or steps anything (control/README.md, "Limits").
MIN_DT_US = 0.01  # 10 ns: finer steps only cost time
MAX_DT_US = 10_000.0
MAX_TIME_US = 3_600e6  # one simulated hour
MAX_STEPS = 20_000_000  # max_time_us / dt_us
MAX_STATE_BYTES = 4 << 30  # the run's arrays (delay history, per-hop queues) before it starts
MAX_ITERATIONS = 10_000
MAX_SIM_FLOWS = 4_000_000  # flows of all jobs x iterations (the job limit, per run)


class SimConfigError(ValueError):
    """A configuration value out of range (the message names the field)."""


def check_run_size(
    *, dt_us: float, max_time_us: float, delay_steps: int, links: int, flows: int, hops: int
) -> None:
    """SimConfigError naming the field when a run would take more steps or memory than the
    bounds above (called once the time step and the fabric are known, before any array)."""
    steps = max_time_us / dt_us
    if steps > MAX_STEPS:
        raise SimConfigError(
            f"max_time_us / dt_us: {steps:.3g} steps, at most {MAX_STEPS:,} (raise dt_us "
            f"{dt_us:g} or lower max_time_us {max_time_us:g})"
        )
    need = 8 * (3 * delay_steps * links + 2 * hops * flows + hops * links + 16 * flows + 16 * links)
    if need > MAX_STATE_BYTES:
        raise SimConfigError(
            f"dt_us: {dt_us:g} us makes a {delay_steps:,}-step delay history; the run would need "
            f"{need / 2**30:.3g} GiB of state, at most {MAX_STATE_BYTES / 2**30:g} GiB (raise dt_us)"
        )


@dataclass(slots=True, frozen=True, kw_only=True)
class SimConfig:
    """One run's knobs. Queue thresholds are per 100 Gbit/s of link rate and scale linearly.

    ECN marks as ice.p4's ECN table does (``p4src/v1model/control/ecn.p4``): nothing below Kmin,
    probability rising linearly to Pmax at Kmax, every packet above Kmax; here on the fluid queue
    in bytes instead of packets.
    """

    routing: str = "ecmp"  # ecmp (ice.p4's hash), ice (the planner's paths), flowlet, spray
    control: str = "dcqcn"  # endpoint rate control: dcqcn, ice (INT, HPCC-style), none
    caps: bool | None = None  # the controller's water-filling caps; None: on with routing ice
    cap_interval_us: float = 100.0  # how often the controller recomputes caps
    # computed caps reach the senders this much later (the agent channel; the virtual-time
    # engine's rates.control_delay_us default at the spec's rates)
    cap_delay_us: float = 100.0
    # the first caps computed (for the collectives that start first) are in place at once: the
    # controller knew the job before it started and pushed them one delay ahead; False: a job
    # learned as it starts (an NCCL log), its first caps one delay late too
    caps_ahead: bool = True
    # with the caps, the start table: an unplanned row starts at what they leave on its
    # candidate paths, not at the line rate (control/congestion/starts.py; ICE only)
    starts: bool = True
    # ICE's own bytes on the fabric links (shim + INT records + feedback frames) per payload
    # byte: the switch-to-switch links carry 1 / (1 + wire_overhead) of their rate as payload
    # (0: payload only; experiment.versus and icectl sim take ICE's from the packet model,
    # experiment/options.py ice_wire_overhead, with the mode's INT sampling)
    wire_overhead: float = 0.0
    dt_us: float | None = None  # time step; None: 200 KB at the fastest NIC (4 us at 400G)
    max_time_us: float = 10e6  # stop here even if flows remain (reported as unfinished)
    mtu_bytes: int = 4096  # RoCEv2 payload per packet (ECN marks count packets)
    ecn_kmin_kb: float = 100.0  # per 100 Gbit/s
    ecn_kmax_kb: float = 400.0
    ecn_pmax: float = 0.2
    # ECN marks on the depth the bytes met at enqueue (ice.p4's enq_qdepth), looked up this many
    # steps back at most (a byte that waited longer counts as arrived then)
    ecn_history_steps: int = 256
    cnp_interval_us: float | None = None  # None: DCQCN's own (50 us at 40G, scaled)
    cnp_delay_us: float | None = None  # marks -> sender's reaction; None: the base RTT
    pfc: bool = False
    pfc_xoff_kb: float = 800.0  # per 100 Gbit/s; pause the upstream above, resume below xon
    pfc_xon_kb: float = 600.0
    flowlet_gap_us: float = 50.0  # flowlet routing: a flow may move after an idle gap this long
    base_rtt_us: float | None = None  # ICE's T; None: the fabric's longest path RTT
    switch_latency_us: float = 1.0  # per switch traversed, in the base RTT (INT feedback delay)
    seed: int = 1
    progress: bool = False
    mode: str | None = None  # the traffic/modes.py mode this configuration runs (its label)

    def __post_init__(self) -> None:
        if self.routing not in ROUTINGS:
            raise SimConfigError(f"routing: expected one of {ROUTINGS}, got {self.routing!r}")
        if self.control != "none" and self.control not in RATE_CLASSES:
            raise SimConfigError(
                f"control: expected one of {(*rate_kinds(), 'none')}, got {self.control!r}"
            )
        if self.dt_us is not None and not MIN_DT_US <= self.dt_us <= MAX_DT_US:
            raise SimConfigError(
                f"dt_us: expected {MIN_DT_US:g}..{MAX_DT_US:g} microseconds, got {self.dt_us!r}"
            )
        if not 0 < self.max_time_us <= MAX_TIME_US:
            raise SimConfigError(
                f"max_time_us: expected > 0 and at most {MAX_TIME_US:g} (one hour), "
                f"got {self.max_time_us!r}"
            )
        for name in (
            "cap_interval_us",
            "mtu_bytes",
            "flowlet_gap_us",
            "ecn_history_steps",
        ):
            if not getattr(self, name) > 0:
                raise SimConfigError(f"{name}: expected > 0, got {getattr(self, name)!r}")
        if not 0 <= self.wire_overhead < 1:
            raise SimConfigError(f"wire_overhead: expected in [0, 1), got {self.wire_overhead!r}")
        if not self.cap_delay_us >= 0:
            raise SimConfigError(f"cap_delay_us: expected >= 0, got {self.cap_delay_us!r}")
        if not 0 <= self.ecn_kmin_kb <= self.ecn_kmax_kb:
            raise SimConfigError(
                f"ecn: expected 0 <= kmin <= kmax, got {self.ecn_kmin_kb}, {self.ecn_kmax_kb}"
            )
        if not 0 <= self.ecn_pmax <= 1:
            raise SimConfigError(f"ecn_pmax: expected in [0, 1], got {self.ecn_pmax!r}")
        if not 0 < self.pfc_xon_kb <= self.pfc_xoff_kb:
            raise SimConfigError(
                f"pfc: expected 0 < xon <= xoff, got {self.pfc_xon_kb}, {self.pfc_xoff_kb}"
            )

    @property
    def use_caps(self) -> bool:
        """Whether the controller's caps are applied."""
        return self.routing == "ice" if self.caps is None else self.caps

    @property
    def label(self) -> str:
        """A short name: the mode's, else routing + control (+ caps)."""
        if self.mode is not None:
            return self.mode
        caps = "+caps" if self.use_caps else ""
        return f"{self.routing}+{self.control}{caps}"


def config_for(mode: Mode, /, **overrides: Any) -> SimConfig:
    """The simulator's configuration of ``mode`` (traffic/modes.py), with ``overrides``."""
    kw: dict[str, Any] = {
        "routing": mode.sim_routing,
        "control": mode.rate,
        "caps": mode.caps,
        "pfc": mode.pfc,
        "mode": mode.name,
    }
    kw.update(overrides)
    return SimConfig(**kw)


def uncontrolled_config(mode: Mode, /, **overrides: Any) -> SimConfig:
    """``mode``'s paths with no congestion control at all: no end-host control, no caps, no
    PFC; every flow at line rate, links shared in FIFO proportion. No bound: rate-controlled
    flows can do better than this, and line-rate background takes more of a shared link than
    any congestion control gives it; the ceiling of a set of paths is ``sim/bound.py``."""
    return config_for(
        mode,
        **{
            **overrides,
            "control": "none",
            "caps": False,
            "pfc": False,
            "mode": f"{mode.name}:uncontrolled",
        },
    )
