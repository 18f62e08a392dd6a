// ECN marking in egress when the queue depth at enqueue reaches a threshold.
#include <core.p4>
#include <v1model.p4>
#include "include/common.p4"

struct headers_t { ethernet_t eth; ipv4_t ipv4; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) { ETHERTYPE_IPV4: parse_ipv4; default: accept; }
    }
    state parse_ipv4 { pkt.extract(hdr.ipv4); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { sm.egress_spec = 2; }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<bit<19>, bit<32>>(1) threshold;
    apply {
        bit<19> th;
        threshold.read(th, 0);
        if (hdr.ipv4.isValid() && hdr.ipv4.ecn != 0 && th != 0 && sm.enq_qdepth >= th) {
            hdr.ipv4.ecn = 3;
        }
    }
}
control CC(inout headers_t hdr, inout meta_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(), IPV4_CHECKSUM_FIELDS(hdr.ipv4),
                        hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); pkt.emit(hdr.ipv4); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
