// Headers shared by the conformance programs.
#ifndef CONFORMANCE_COMMON_P4
#define CONFORMANCE_COMMON_P4

#define ETHERTYPE_IPV4 0x0800
const bit<8> PROTO_UDP = 17;
const bit<8> PROTO_TCP = 6;

typedef bit<48> mac_t;
typedef bit<32> ip4_t;

header ethernet_t {
    mac_t   dst;
    mac_t   src;
    bit<16> ether_type;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<6>  dscp;
    bit<2>  ecn;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    ip4_t   src;
    ip4_t   dst;
}

header udp_t {
    bit<16> sport;
    bit<16> dport;
    bit<16> length;
    bit<16> checksum;
}

#define IPV4_CHECKSUM_FIELDS(h) { h.version, h.ihl, h.dscp, h.ecn, h.total_len, \
    h.identification, h.flags, h.frag_offset, h.ttl, h.protocol, h.src, h.dst }

#endif
