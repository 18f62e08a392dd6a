// Source routing with a header stack: each hop pops the first entry and uses its port.
#include <core.p4>
#include <v1model.p4>
#include "include/common.p4"

const bit<16> ETHERTYPE_SRCROUTE = 0x1234;
#define MAX_HOPS 8

header srcroute_t {
    bit<1>  bos;
    bit<15> port;
}

struct headers_t {
    ethernet_t eth;
    srcroute_t[MAX_HOPS] routes;
    ipv4_t ipv4;
}
struct meta_t { bit<8> hops; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) {
            ETHERTYPE_SRCROUTE: parse_route;
            default: accept;
        }
    }
    state parse_route {
        pkt.extract(hdr.routes.next);
        meta.hops = meta.hops + 1;
        transition select(hdr.routes.last.bos) {
            1: parse_ipv4;
            default: parse_route;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (sm.parser_error != error.NoError) {
            mark_to_drop(sm);
            return;
        }
        if (hdr.routes[0].isValid()) {
            sm.egress_spec = (bit<9>)hdr.routes[0].port;
            if (hdr.routes[0].bos == 1) {
                // Last hop: back to plain IPv4.
                hdr.eth.ether_type = ETHERTYPE_IPV4;
                hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
            }
            hdr.routes.pop_front(1);
        } else {
            mark_to_drop(sm);
        }
    }
}

control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(), IPV4_CHECKSUM_FIELDS(hdr.ipv4),
                        hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}
control D(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.routes); pkt.emit(hdr.ipv4); }
}
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
