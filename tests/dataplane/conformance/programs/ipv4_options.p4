// IPv4 options as a varbit field sized from ihl; the checksum covers the options.
#include <core.p4>
#include <v1model.p4>
#include "include/common.p4"

header ipv4_options_t { varbit<320> options; }
header opt_len_t { bit<8> bytes; }

struct headers_t { opt_len_t info; ethernet_t eth; ipv4_t ipv4; ipv4_options_t opts; udp_t udp; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) { ETHERTYPE_IPV4: parse_ipv4; default: accept; }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        verify(hdr.ipv4.ihl >= 5, error.HeaderTooShort);
        transition select(hdr.ipv4.ihl) {
            5: parse_l4;
            default: parse_options;
        }
    }
    state parse_options {
        pkt.extract(hdr.opts, (bit<32>)(((bit<16>)hdr.ipv4.ihl - 5) * 32));
        transition parse_l4;
    }
    state parse_l4 {
        transition select(hdr.ipv4.protocol) { PROTO_UDP: parse_udp; default: accept; }
    }
    state parse_udp { pkt.extract(hdr.udp); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (sm.parser_error != error.NoError) { mark_to_drop(sm); exit; }
        sm.egress_spec = 2;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        hdr.info.setValid();
        hdr.info.bytes = hdr.opts.isValid() ? ((bit<8>)hdr.ipv4.ihl - 5) << 2 : 8w0;
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid() && !hdr.opts.isValid(), IPV4_CHECKSUM_FIELDS(hdr.ipv4),
                        hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
        update_checksum(hdr.ipv4.isValid() && hdr.opts.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src, hdr.ipv4.dst, hdr.opts.options },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}
control D(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.info);
        pkt.emit(hdr.eth);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.opts);
        pkt.emit(hdr.udp);
    }
}
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
