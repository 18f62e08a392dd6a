// ECMP two ways: an explicit hash() into metadata + exact table, and an action_selector.
#include <core.p4>
#include <v1model.p4>
#include "include/common.p4"

struct headers_t { ethernet_t eth; ipv4_t ipv4; udp_t udp; }
struct meta_t { bit<14> ecmp_select; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) { ETHERTYPE_IPV4: parse_ipv4; default: accept; }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) { PROTO_UDP: parse_udp; default: accept; }
    }
    state parse_udp { pkt.extract(hdr.udp); transition accept; }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action drop() { mark_to_drop(sm); }
    action set_ecmp(bit<16> base, bit<32> count) {
        hash(meta.ecmp_select, HashAlgorithm.crc16, base,
             { hdr.ipv4.src, hdr.ipv4.dst, hdr.ipv4.protocol, hdr.udp.sport, hdr.udp.dport },
             count);
    }
    action set_port(bit<9> port) { sm.egress_spec = port; }

    table ecmp_group {
        key = { hdr.ipv4.dst: lpm; }
        actions = { drop; set_ecmp; }
        default_action = drop();
    }
    table ecmp_nhop {
        key = { meta.ecmp_select: exact; }
        actions = { drop; set_port; }
        default_action = drop();
    }

    action_selector(HashAlgorithm.crc16, 32w64, 32w14) selector;
    table ecmp_selector {
        key = {
            hdr.ipv4.dst: exact;
            hdr.ipv4.src: selector;
            hdr.udp.sport: selector;
        }
        actions = { set_port; drop; }
        implementation = selector;
        default_action = drop();
    }

    apply {
        if (!hdr.udp.isValid()) { drop(); exit; }
        if (hdr.ipv4.ttl == 99) {
            ecmp_selector.apply();
        } else {
            switch (ecmp_group.apply().action_run) {
                set_ecmp: { ecmp_nhop.apply(); }
            }
        }
    }
}

control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.ipv4); pkt.emit(hdr.udp); }
}
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
