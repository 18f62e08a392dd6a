// Resubmit and recirculate with preserved field lists: a packet makes `passes` trips.
#include <core.p4>
#include <v1model.p4>
#include "include/common.p4"

header trips_t { bit<8> resubmits; bit<8> recircs; bit<8> instance; bit<8> pad; }
struct headers_t { ethernet_t eth; trips_t trips; }
struct meta_t {
    @field_list(1)
    bit<8> resubmits;
    @field_list(1, 2)
    bit<8> recircs;
    bit<8> not_preserved;
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) { 0x9999: parse_trips; default: accept; }
    }
    state parse_trips { pkt.extract(hdr.trips); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 2;
        if (!hdr.trips.isValid()) { return; }
        if (meta.resubmits < 2) {
            meta.resubmits = meta.resubmits + 1;
            meta.not_preserved = 0xAA;
            resubmit_preserving_field_list(1);
            return;
        }
        hdr.trips.resubmits = meta.resubmits;
        hdr.trips.recircs = meta.recircs;
        hdr.trips.instance = (bit<8>)sm.instance_type;
        hdr.trips.pad = meta.not_preserved;
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.trips.isValid() && meta.recircs < 1) {
            meta.recircs = meta.recircs + 1;
            recirculate_preserving_field_list(2);
        }
    }
}
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); pkt.emit(hdr.trips); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
