#ifndef ICE_PARSER_P4
#define ICE_PARSER_P4

// Every sanity check that can be made on the header bytes alone is a parser verify(): the
// packet then reaches ingress with parser_error set, is dropped there and counted by reason,
// and nothing of it survives into the next packet (all state is per packet).
parser IceParser(packet_in packet,
                 out headers_t hdr,
                 inout local_metadata_t md,
                 inout standard_metadata_t standard_metadata) {

    state start {
        transition select(standard_metadata.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }

    state parse_packet_out {
        packet.extract(hdr.packet_out);
        transition parse_ethernet;
    }

    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_ICE: parse_ice_shim;
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_ARP: parse_arp;
            default: accept;
        }
    }

    state parse_arp {
        packet.extract(hdr.arp);
        transition accept;
    }

    state parse_ice_shim {
        packet.extract(hdr.ice_shim);
        verify(hdr.ice_shim.version == ICE_VERSION, error.IceBadVersion);
        verify(hdr.ice_shim.int_hop_count <= INT_MAX_HOPS, error.IceTooManyHops);
        verify(hdr.ice_shim.orig_ether_type == ETHERTYPE_IPV4, error.IceBadInnerType);
        md.int_hops_left = hdr.ice_shim.int_hop_count;
        transition select(hdr.ice_shim.int_hop_count) {
            0: parse_ipv4;
            default: parse_int_hop;
        }
    }

    state parse_int_hop {
        packet.extract(hdr.int_hops.next);
        md.int_hops_left = md.int_hops_left - 1;
        transition select(md.int_hops_left) {
            0: parse_ipv4;
            default: parse_int_hop;
        }
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        verify(hdr.ipv4.version == 4, error.Ipv4BadVersion);
        verify(hdr.ipv4.ihl >= 5, error.Ipv4IhlTooSmall);
        verify(hdr.ipv4.total_len >= ((bit<16>)hdr.ipv4.ihl << 2), error.Ipv4TotalLenTooSmall);
        transition select(hdr.ipv4.ihl) {
            5: dispatch_ipv4_protocol;
            default: parse_ipv4_options;
        }
    }

    state parse_ipv4_options {
        packet.extract(hdr.ipv4_options, ((bit<32>)hdr.ipv4.ihl - 5) << 5);
        transition dispatch_ipv4_protocol;
    }

    // Only the first fragment carries the UDP header.
    state dispatch_ipv4_protocol {
        transition select(hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (0, IP_PROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        packet.extract(hdr.udp);
        verify(hdr.udp.length >= 8, error.UdpLengthTooSmall);
        transition select(hdr.udp.dst_port) {
            UDP_PORT_ROCEV2: parse_bth;
            default: accept;
        }
    }

    state parse_bth {
        packet.extract(hdr.bth);
        transition accept;
    }
}

#endif  // ICE_PARSER_P4
