// Cloning: I2E mirror of every packet to a session, E2E copy of packets leaving port 3.
#include <core.p4>
#include <v1model.p4>
#include "include/common.p4"

const bit<32> I2E_SESSION = 5;
const bit<32> E2E_SESSION = 6;
const bit<32> INSTANCE_I2E = 1;
const bit<32> INSTANCE_E2E = 2;

header mirror_t {
    bit<8>  kind;      // 1: I2E copy, 2: E2E copy
    bit<8>  orig_port;
}

struct headers_t { mirror_t mirror; ethernet_t eth; }
struct meta_t {
    @field_list(1)
    bit<9> orig_port;
    bit<9> scratch;
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.eth); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        meta.orig_port = sm.ingress_port;
        meta.scratch = 7;
        sm.egress_spec = (sm.ingress_port == 1) ? 9w3 : 9w4;
        hdr.eth.src = 0xFFFFFFFFFFFF;  // the I2E clone must not see this change
        clone_preserving_field_list(CloneType.I2E, I2E_SESSION, 1);
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (sm.instance_type == INSTANCE_I2E || sm.instance_type == INSTANCE_E2E) {
            hdr.mirror.setValid();
            hdr.mirror.kind = (bit<8>)sm.instance_type;
            hdr.mirror.orig_port = (bit<8>)meta.orig_port;
            if (meta.scratch != 0) {
                hdr.mirror.kind = 0xEE;  // metadata outside the field list must be reset
            }
        } else if (sm.egress_port == 3) {
            clone_preserving_field_list(CloneType.E2E, E2E_SESSION, 1);
        }
    }
}
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.mirror); pkt.emit(hdr.eth); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
