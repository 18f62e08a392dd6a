// Parser errors do not drop by themselves: ingress sees standard_metadata.parser_error and
// reports it; verify() raises a user error; the unparsed rest is kept as payload.
#include <core.p4>
#include <v1model.p4>
#include "include/common.p4"

error { BadVersion }

header report_t { bit<8> code; bit<8> ipv4_valid; }
struct headers_t { ethernet_t eth; ipv4_t ipv4; udp_t udp; report_t report; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            0x0801 &&& 0xFFFF: reject;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        verify(hdr.ipv4.version == 4, error.BadVersion);
        transition select(hdr.ipv4.protocol) { PROTO_UDP: parse_udp; default: accept; }
    }
    state parse_udp { pkt.extract(hdr.udp); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 2;
        if (sm.parser_error != error.NoError) {
            hdr.report.setValid();
            hdr.report.code = 0xFF;
            if (sm.parser_error == error.PacketTooShort) { hdr.report.code = 1; }
            if (sm.parser_error == error.NoMatch) { hdr.report.code = 2; }
            if (sm.parser_error == error.BadVersion) { hdr.report.code = 3; }
            hdr.report.ipv4_valid = hdr.ipv4.isValid() ? 8w1 : 8w0;
            sm.egress_spec = 3;
        }
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.report); pkt.emit(hdr.eth); pkt.emit(hdr.ipv4); pkt.emit(hdr.udp); }
}
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
