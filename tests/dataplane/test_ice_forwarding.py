"""Plain forwarding of ice.p4: ping across the fabric, ARP answers and punts."""

from __future__ import annotations

import pytest
from leaf_spine import GATEWAYS, HOSTS, SWITCH_MACS, LeafSpine
from scapy.layers.inet import ICMP, IP
from scapy.layers.l2 import ARP, Ether

from icefabric.traffic import packets as P

pytestmark = pytest.mark.dataplane


def _ping(src: str, dst: str, seq: int) -> bytes:
    s, d = HOSTS[src], HOSTS[dst]
    return bytes(
        Ether(src=s.mac, dst=SWITCH_MACS[s.leaf])
        / IP(src=s.ip, dst=d.ip, ttl=64)
        / ICMP(type="echo-request", id=7, seq=seq)
        / b"ping-payload"
    )


def test_ping_crosses_leaf_spine_leaf(fabric: LeafSpine) -> None:
    l2 = fabric.fabric["L2"]
    tx_before = l2.counter("IceEgress.port_tx_counter", HOSTS["h3"].port)
    fabric.send("h1", _ping("h1", "h3", 1))
    fabric.fabric.run()
    got = fabric.received("h3")
    assert len(got) == 1
    tx_after = l2.counter("IceEgress.port_tx_counter", HOSTS["h3"].port)
    assert tx_after[0] == tx_before[0] + 1 and tx_after[1] >= tx_before[1] + len(got[0])
    pkt = Ether(got[0])
    assert pkt[Ether].dst == HOSTS["h3"].mac
    assert pkt[Ether].src == SWITCH_MACS["L2"]
    assert pkt[IP].ttl == 61  # three routed hops
    assert pkt[ICMP].seq == 1 and bytes(pkt[ICMP].payload) == b"ping-payload"
    # the checksum the switch wrote is right
    fixed = IP(bytes(pkt[IP]))
    del fixed.chksum
    assert IP(bytes(fixed)).chksum == pkt[IP].chksum

    # and the echo reply finds its way back
    s, d = HOSTS["h3"], HOSTS["h1"]
    reply = (
        Ether(src=s.mac, dst=SWITCH_MACS["L2"])
        / IP(src=s.ip, dst=d.ip)
        / ICMP(type="echo-reply", id=7, seq=1)
    )
    fabric.send("h3", bytes(reply))
    fabric.fabric.run()
    back = fabric.received("h1")
    assert len(back) == 1 and Ether(back[0])[ICMP].type == 0


def test_ping_between_hosts_of_one_leaf(fabric: LeafSpine) -> None:
    fabric.send("h1", _ping("h1", "h2", 5))
    fabric.fabric.run()
    got = fabric.received("h2")
    assert len(got) == 1 and Ether(got[0])[IP].ttl == 63
    assert fabric.received("h3") == []


def test_ttl_expiry_drops_and_counts(fabric: LeafSpine) -> None:
    s, d = HOSTS["h1"], HOSTS["h3"]
    pkt = Ether(src=s.mac, dst=SWITCH_MACS["L1"]) / IP(src=s.ip, dst=d.ip, ttl=2) / ICMP()
    fabric.send("h1", bytes(pkt))
    fabric.fabric.run()
    assert fabric.received("h3") == []
    spine_drops = fabric.fabric["S1"].counter(
        "IceIngress.drop_reason_counter", P.DROP_REASON_TTL_EXPIRED
    )
    assert spine_drops[0] == 1


def test_arp_request_for_gateway_is_answered(fabric: LeafSpine) -> None:
    h = HOSTS["h1"]
    req = Ether(src=h.mac, dst="ff:ff:ff:ff:ff:ff") / ARP(
        op=1, hwsrc=h.mac, psrc=h.ip, hwdst="00:00:00:00:00:00", pdst=GATEWAYS["L1"]
    )
    fabric.send("h1", bytes(req))
    fabric.fabric.run()
    got = fabric.received("h1")
    assert len(got) == 1
    rep = Ether(got[0])
    assert rep[Ether].dst == h.mac and rep[Ether].src == SWITCH_MACS["L1"]
    assert rep[ARP].op == 2
    assert rep[ARP].hwsrc == SWITCH_MACS["L1"] and rep[ARP].psrc == GATEWAYS["L1"]
    assert rep[ARP].hwdst == h.mac and rep[ARP].pdst == h.ip


def test_unknown_arp_is_punted_to_the_controller(fabric: LeafSpine) -> None:
    h = HOSTS["h1"]
    req = Ether(src=h.mac, dst="ff:ff:ff:ff:ff:ff") / ARP(
        op=1, hwsrc=h.mac, psrc=h.ip, pdst="10.0.1.77"
    )
    fabric.send("h1", bytes(req))
    fabric.fabric.run()
    assert fabric.received("h1") == []
    pins = fabric.fabric["L1"].wait_packet_ins(1)
    assert pins[0].metadata["ingress_port"] == h.port
    assert pins[0].metadata["reason"] == P.PUNT_REASON_ARP
    assert Ether(pins[0].payload)[ARP].pdst == "10.0.1.77"


def test_packet_out_leaves_on_the_requested_port(fabric: LeafSpine) -> None:
    frame = bytes(
        Ether(src=SWITCH_MACS["L1"], dst=HOSTS["h2"].mac) / IP(dst=HOSTS["h2"].ip) / ICMP()
    )
    fabric.fabric["L1"].conn.packet_out(frame, egress_port=HOSTS["h2"].port, _pad0=0)
    got = fabric.fabric.wait_received("L1", HOSTS["h2"].port, 1)
    assert got == [frame]
