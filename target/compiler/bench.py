"""The 3-table forwarding pipeline used to measure the compiler's packets/s in process."""

from __future__ import annotations

import time
from dataclasses import dataclass

from icefabric.target.compiler.pipeline import Pipeline, PipelineEnv
from icefabric.target.compiler.program import Program, compile_source
from icefabric.target.runtime import ActionCall, Match, TableEntry

FORWARDING_P4 = """
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> tos; bit<16> total_len; bit<16> id;
    bit<3> flags; bit<13> frag; bit<8> ttl; bit<8> protocol; bit<16> csum;
    bit<32> src; bit<32> dst;
}
struct headers_t { ethernet_t eth; ipv4_t ipv4; }
struct meta_t { bit<16> nhop; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) { 0x0800: ipv4; default: accept; }
    }
    state ipv4 { pkt.extract(hdr.ipv4); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action drop() { mark_to_drop(sm); }
    action set_nhop(bit<16> nhop) { meta.nhop = nhop; hdr.ipv4.ttl = hdr.ipv4.ttl - 1; }
    action set_port(bit<48> dmac, bit<9> port) { hdr.eth.dst = dmac; sm.egress_spec = port; }
    table routes { key = { hdr.ipv4.dst: lpm; } actions = { set_nhop; drop; }
                   default_action = drop(); size = 4096; }
    table nexthops { key = { meta.nhop: exact; } actions = { set_port; drop; }
                     default_action = drop(); }
    apply {
        if (hdr.ipv4.isValid() && hdr.ipv4.ttl > 1) {
            routes.apply();
            nexthops.apply();
        } else {
            drop();
        }
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action set_smac(bit<48> smac) { hdr.eth.src = smac; }
    table port_mac { key = { sm.egress_port: exact; } actions = { set_smac; NoAction; }
                     default_action = NoAction(); }
    apply { port_mac.apply(); }
}
control CC(inout headers_t hdr, inout meta_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.tos, hdr.ipv4.total_len, hdr.ipv4.id,
              hdr.ipv4.flags, hdr.ipv4.frag, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.src, hdr.ipv4.dst },
            hdr.ipv4.csum, HashAlgorithm.csum16);
    }
}
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); pkt.emit(hdr.ipv4); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
"""


@dataclass(frozen=True, slots=True)
class BenchResult:
    """Packets processed, seconds taken and the rate."""

    packets: int
    seconds: float

    @property
    def pps(self) -> float:
        """Packets per second."""
        return self.packets / self.seconds if self.seconds > 0 else 0.0


def forwarding_program() -> Program:
    """The compiled 3-table forwarding program (cached by source hash)."""
    return compile_source(FORWARDING_P4, filename="bench_forwarding.p4")


def _ipv4_udp(dst: int, payload_len: int) -> bytes:
    """An Ethernet/IPv4/UDP frame with a correct IPv4 checksum (no scapy needed)."""
    total = 20 + 8 + payload_len
    hdr = bytearray(
        bytes.fromhex("45000000000100004011")
        + b"\x00\x00"
        + bytes([10, 0, 0, 1])
        + dst.to_bytes(4, "big")
    )
    hdr[2:4] = total.to_bytes(2, "big")
    s = sum(int.from_bytes(hdr[i : i + 2], "big") for i in range(0, 20, 2))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    hdr[10:12] = (~s & 0xFFFF).to_bytes(2, "big")
    eth = bytes.fromhex("0000000000aa000000000001") + b"\x08\x00"
    udp = (1234).to_bytes(2, "big") + (4791).to_bytes(2, "big")
    udp += (8 + payload_len).to_bytes(2, "big") + b"\x00\x00"
    return eth + bytes(hdr) + udp + bytes(payload_len)


def forwarding_pipeline(
    env: PipelineEnv | None = None, *, routes: int = 64, flows: int = 32, payload_len: int = 64
) -> tuple[Pipeline, list[bytes]]:
    """A pipeline of the forwarding program with ``routes`` /24 routes and sample packets."""
    pipeline = forwarding_program().instantiate(env)
    t_routes = pipeline.tables["Ing.routes"]
    t_nhops = pipeline.tables["Ing.nexthops"]
    t_mac = pipeline.tables["Eg.port_mac"]
    for i in range(routes):
        prefix = (10 << 24) | (i << 8)
        t_routes.insert(
            TableEntry(match=(Match.lpm(prefix, 24),), action=ActionCall("Ing.set_nhop", (i,)))
        )
        port = 1 + i % 8
        t_nhops.insert(
            TableEntry(
                match=(Match.exact(i),), action=ActionCall("Ing.set_port", (0xAA00 + i, port))
            )
        )
    for port in range(1, 9):
        t_mac.insert(
            TableEntry(
                match=(Match.exact(port),), action=ActionCall("Eg.set_smac", (0xBB00 + port,))
            )
        )
    packets = [_ipv4_udp((10 << 24) | ((i % routes) << 8) | 7, payload_len) for i in range(flows)]
    return pipeline, packets


def run_pipeline(pipeline: Pipeline, packets: list[bytes], count: int) -> BenchResult:
    """Push ``count`` packets through ingress + egress (no traffic manager) and time it."""
    ingress = pipeline.ingress
    egress = pipeline.egress
    n = len(packets)
    start = time.perf_counter()
    for i in range(count):
        res = ingress(packets[i % n], 0)
        if not res.drop:
            egress(res.ctx, egress_port=res.egress_spec)
    return BenchResult(count, time.perf_counter() - start)
