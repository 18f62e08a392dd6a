// MAC learning with a digest: unknown source MACs are reported to the controller.
#include <core.p4>
#include <v1model.p4>
#include "include/common.p4"

struct learn_t {
    mac_t  src_mac;
    bit<9> ingress_port;
}

struct headers_t { ethernet_t eth; }
struct meta_t { learn_t learn; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.eth); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action learn() {
        meta.learn.src_mac = hdr.eth.src;
        meta.learn.ingress_port = sm.ingress_port;
        digest<learn_t>(1, meta.learn);
    }
    action forward(bit<9> port) { sm.egress_spec = port; }
    action flood() { sm.mcast_grp = 1; }
    table smac {
        key = { hdr.eth.src: exact; }
        actions = { learn; NoAction; }
        size = 256;
        default_action = learn();
    }
    table dmac {
        key = { hdr.eth.dst: exact; }
        actions = { forward; flood; }
        size = 256;
        default_action = flood();
    }
    apply {
        smac.apply();
        dmac.apply();
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (sm.egress_port == sm.ingress_port) { mark_to_drop(sm); }
    }
}
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
