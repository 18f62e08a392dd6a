// Multicast flood: the group comes from a table; egress prunes the ingress port and tags
// each copy with its egress_rid.
#include <core.p4>
#include <v1model.p4>
#include "include/common.p4"

header rid_t { bit<16> rid; bit<16> port; }
struct headers_t { ethernet_t eth; rid_t rid; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.eth); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action flood(bit<16> group) { sm.mcast_grp = group; }
    table vlan_flood {
        key = { sm.ingress_port: exact; }
        actions = { flood; NoAction; }
        default_action = NoAction();
    }
    apply {
        vlan_flood.apply();
        if (sm.mcast_grp == 0) { mark_to_drop(sm); }
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (sm.egress_port == sm.ingress_port) {
            mark_to_drop(sm);
        } else {
            hdr.rid.setValid();
            hdr.rid.rid = sm.egress_rid;
            hdr.rid.port = (bit<16>)sm.egress_port;
        }
    }
}
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); pkt.emit(hdr.rid); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
