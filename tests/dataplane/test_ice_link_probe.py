"""Link probes in ice.p4: LLDP leaves by packet-out, comes back as a LINK_PROBE packet-in."""

from __future__ import annotations

import pytest
from harness import wait_for
from leaf_spine import C_DROP_REASON, C_PORT_TX, HOSTS, SPINE_DOWN, UPLINK, LeafSpine

from icefabric.control.lldp import LldpProbe
from icefabric.control.p4rt import PacketIn
from icefabric.traffic import packets as P

pytestmark = pytest.mark.dataplane


def _packet_ins(ls: LeafSpine, switch: str, count: int) -> list[PacketIn]:
    """Run the fabric until `switch` sent `count` packet-ins (packet-outs enter asynchronously)."""
    got: list[PacketIn] = []

    def enough() -> bool:
        ls.fabric.run()
        got.extend(ls.fabric[switch].packet_ins())
        return len(got) >= count

    wait_for(enough, 5.0, f"{count} packet-in(s) from {switch}")
    return got


def _drops(ls: LeafSpine, switch: str) -> list[tuple[int, int]]:
    return [ls.fabric[switch].counter(C_DROP_REASON, r) for r in range(1, 12)]


def test_probe_crosses_one_link_and_comes_back_as_packet_in(fabric: LeafSpine) -> None:
    probe = LldpProbe(chassis="L1", port=UPLINK["S1"], ttl_s=1).encode()
    drops_before = {sw: _drops(fabric, sw) for sw in ("L1", "L2", "S1", "S2")}
    s1_tx_before = fabric.fabric["S1"].counter(C_PORT_TX, SPINE_DOWN["L2"])

    # packet-out on L1 leaves by the uplink to S1 and S1 punts it with the port it came in on
    fabric.fabric["L1"].conn.packet_out(probe, egress_port=UPLINK["S1"], _pad0=0)
    pins = _packet_ins(fabric, "S1", 1)
    assert len(pins) == 1
    assert pins[0].metadata["reason"] == P.PUNT_REASON_LINK_PROBE
    assert pins[0].metadata["ingress_port"] == SPINE_DOWN["L1"]
    assert pins[0].payload == probe  # the frame as sent, no header left in front
    got = LldpProbe.decode(pins[0].payload)
    assert (got.chassis, got.port) == ("L1", UPLINK["S1"])

    # never forwarded: no host, no other switch sees it, S1 sent nothing towards L2
    fabric.fabric.run()
    for h in HOSTS:
        assert fabric.received(h) == []
    for sw in ("L1", "L2", "S2"):
        assert fabric.fabric[sw].packet_ins() == []
    assert fabric.fabric["S1"].packet_ins() == []
    assert fabric.fabric["S1"].counter(C_PORT_TX, SPINE_DOWN["L2"]) == s1_tx_before
    # a probe is not a drop
    for sw, before in drops_before.items():
        assert _drops(fabric, sw) == before, sw


def test_probe_from_a_spine_reaches_the_leaf(fabric: LeafSpine) -> None:
    probe = LldpProbe(chassis="S2", port=SPINE_DOWN["L2"]).encode()
    fabric.fabric["S2"].conn.packet_out(probe, egress_port=SPINE_DOWN["L2"], _pad0=0)
    pins = _packet_ins(fabric, "L2", 1)
    assert pins[0].metadata["reason"] == P.PUNT_REASON_LINK_PROBE
    assert pins[0].metadata["ingress_port"] == UPLINK["S2"]
    assert LldpProbe.decode(pins[0].payload).chassis == "S2"


def test_lldp_from_a_host_port_is_punted_not_forwarded(fabric: LeafSpine) -> None:
    # a server running lldpd: the controller sees the frame (and counts it as foreign)
    frame = LldpProbe(chassis="h1", port=0, src_mac=HOSTS["h1"].mac).encode()
    before = _drops(fabric, "L1")
    fabric.send("h1", frame)
    pins = _packet_ins(fabric, "L1", 1)
    assert pins[0].metadata["reason"] == P.PUNT_REASON_LINK_PROBE
    assert pins[0].metadata["ingress_port"] == HOSTS["h1"].port
    fabric.fabric.run()
    assert all(fabric.received(h) == [] for h in HOSTS)
    assert _drops(fabric, "L1") == before


def test_other_unknown_ethertypes_are_still_dropped(fabric: LeafSpine) -> None:
    # only LLDP is punted: the unsupported-EtherType drop is unchanged
    frame = bytes.fromhex("0180c200000e0200000000018809") + bytes(46)  # slow protocols
    before = fabric.fabric["L1"].counter(C_DROP_REASON, P.DROP_REASON_UNSUPPORTED)[0]
    fabric.send("h1", frame)
    fabric.fabric.run()
    after = fabric.fabric["L1"].counter(C_DROP_REASON, P.DROP_REASON_UNSUPPORTED)[0]
    assert after == before + 1
    assert fabric.fabric["L1"].packet_ins() == []
