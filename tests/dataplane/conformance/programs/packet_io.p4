// Packet-in / packet-out through the CPU port with @controller_header headers.
#include <core.p4>
#include <v1model.p4>
#include "include/common.p4"

#define CPU_PORT 64

@controller_header("packet_in")
header packet_in_t {
    bit<9> ingress_port;
    bit<7> _pad;
}

@controller_header("packet_out")
header packet_out_t {
    bit<9> egress_port;
    bit<7> _pad;
}

struct headers_t { packet_out_t out_hdr; packet_in_t in_hdr; ethernet_t eth; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        transition select(sm.ingress_port) { CPU_PORT: parse_out; default: parse_eth; }
    }
    state parse_out { pkt.extract(hdr.out_hdr); transition parse_eth; }
    state parse_eth { pkt.extract(hdr.eth); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.out_hdr.isValid()) {
            sm.egress_spec = hdr.out_hdr.egress_port;
            hdr.out_hdr.setInvalid();
        } else if (hdr.eth.ether_type == 0x88CC) {
            sm.egress_spec = CPU_PORT;
        } else {
            mark_to_drop(sm);
        }
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (sm.egress_port == CPU_PORT) {
            hdr.in_hdr.setValid();
            hdr.in_hdr.ingress_port = sm.ingress_port;
            hdr.in_hdr._pad = 0;
        }
    }
}
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.in_hdr); pkt.emit(hdr.eth); }
}
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
