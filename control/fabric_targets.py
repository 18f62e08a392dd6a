"""What base forwarding sets differently per switch target: the embedded switch (the
default), BMv2's simple_switch_grpc and Tofino (p4src/tna/ice.p4)."""

from __future__ import annotations

from dataclasses import replace

from icefabric.control.fabric import FabricOptions

TARGETS = ("embedded", "bmv2", "tofino")

# Tofino (p4src/tna/ice.p4): the CPU port of its default build (-DICE_TNA_CPU_PORT), and what the
# last-hop mirror sessions keep of a copy (TNA has no truncate()): feedback and reports need the
# mirror header 32 + Ethernet 14 + shim 8 + at most 4 INT records 144 = 198 bytes (Tofino 1: 3
# records, 162); the rest of the copy is padding behind the records, so 272 keeps a margin.
TOFINO_DEFAULT_CPU_PORT = 64
TOFINO_CLONE_PACKET_LENGTH = 272
# Tofino queue depths are in cells (80 bytes on Tofino 1), not packets, and its ECN ramp uses
# Kmax - Kmin as a mask (p4src/tna/control/ecn.p4): 65 cells ~ 5 packets of 1 KB (the
# v1model Kmin), 65 + 255 cells ~ 25 packets.
TOFINO_ECN_KMIN_CELLS = 65
TOFINO_ECN_KMAX_CELLS = 65 + 255
# The TNA program's ingress clock, which its flowlet and INT sampler registers read, is the
# nanosecond timestamp >> 10: ticks of 1,024 ns (p4src/tna/control/ingress.p4, take_time).
TOFINO_INGRESS_CLOCK_NS = 1024


def for_target(options: FabricOptions, target: str) -> FabricOptions:
    """``options`` as ``target`` needs them.  Tofino: its mirror sessions' copy length, ECN
    thresholds in cells and ingress clock.  The embedded target alone honours P4Runtime's
    ``CloneSessionEntry.class_of_service`` (the copies' queue, target/README.md), so there the
    last hop's feedback copies leave at the feedback priority, as CNPs do; PI, under BMv2 and
    Tofino's switch daemon, refuses a non-zero one (``UNIMPLEMENTED``): there the copies wait
    behind the data queued on their first port."""
    if target not in TARGETS:
        raise ValueError(f"target: expected one of {', '.join(TARGETS)}, got {target!r}")
    options = replace(options, feedback_class_of_service=target == "embedded")
    if target == "tofino":
        options = replace(
            options,
            clone_packet_length=TOFINO_CLONE_PACKET_LENGTH,
            ecn_kmin=TOFINO_ECN_KMIN_CELLS,
            ecn_kmax=TOFINO_ECN_KMAX_CELLS,
            switch_clock_ns=TOFINO_INGRESS_CLOCK_NS,
        )
    return options
