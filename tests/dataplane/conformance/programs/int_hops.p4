// INT-style telemetry: egress pushes a hop record (switch id, port, queue depth) onto a stack.
#include <core.p4>
#include <v1model.p4>
#include "include/common.p4"

const bit<16> ETHERTYPE_INT = 0x88B5;
const bit<8> MAX_RECORDS = 4;

header int_shim_t {
    bit<8>  count;      // records present
    bit<8>  remaining;  // records that may still be added
    bit<16> next_type;  // ether type after the records
}

header int_hop_t {
    bit<16> switch_id;
    bit<7>  pad;
    bit<9>  egress_port;
    bit<32> qdepth;
    bit<32> hop_latency;
}

struct headers_t {
    ethernet_t eth;
    int_shim_t shim;
    int_hop_t[4] hops;
}
struct meta_t { bit<8> left; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) { ETHERTYPE_INT: parse_shim; default: accept; }
    }
    state parse_shim {
        pkt.extract(hdr.shim);
        meta.left = hdr.shim.count;
        transition select(meta.left) { 0: accept; default: parse_hop; }
    }
    state parse_hop {
        pkt.extract(hdr.hops.next);
        meta.left = meta.left - 1;
        transition select(meta.left) { 0: accept; default: parse_hop; }
    }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action set_port(bit<9> port) { sm.egress_spec = port; }
    table fwd {
        key = { sm.ingress_port: exact; }
        actions = { set_port; NoAction; }
        const entries = {
            1 : set_port(2);
            2 : set_port(1);
        }
        default_action = NoAction();
    }
    apply {
        fwd.apply();
        if (sm.egress_spec == 0) { mark_to_drop(sm); }
    }
}

control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action push_hop(bit<16> switch_id) {
        hdr.hops.push_front(1);
        hdr.hops[0].setValid();
        hdr.hops[0].switch_id = switch_id;
        hdr.hops[0].egress_port = sm.egress_port;
        hdr.hops[0].qdepth = (bit<32>)sm.deq_qdepth;
        hdr.hops[0].hop_latency = sm.deq_timedelta;
        hdr.shim.count = hdr.shim.count + 1;
        hdr.shim.remaining = hdr.shim.remaining |-| 1;
    }
    table int_config {
        actions = { push_hop; }
        default_action = push_hop(16w0x0A0A);
    }
    apply {
        if (hdr.shim.isValid() && hdr.shim.remaining > 0) {
            int_config.apply();
        }
    }
}

control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.shim); pkt.emit(hdr.hops); }
}
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
