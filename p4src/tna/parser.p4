#ifndef ICE_TNA_PARSER_P4
#define ICE_TNA_PARSER_P4

// Ingress parser.  The same headers and checks as the v1model IceParser, written for a Tofino
// parser: no verify() (a failed check moves to a state that records the drop reason, and
// ingress drops and counts it as v1model does for parser_error), no arithmetic in select
// (value/mask and ranges only), a ParserCounter for the IPv4 option words, and the IPv4
// checksum verified by the parser's checksum unit.
parser IceTnaIngressParser(packet_in pkt,
                           out ice_ingress_headers_t hdr,
                           out ice_ingress_metadata_t md,
                           out ingress_intrinsic_metadata_t ig_intr_md) {

    Checksum() ipv4_checksum;
    ParserCounter() option_words;

    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        // Tofino does not zero metadata: start every field ingress reads before writing it
        // (but checksum_error, see parse_ipv4_done).
        md.drop_reason = DROP_REASON_NONE;
        md.no_port = 0;
        md.switch_id = 0;
        md.switch_role = SWITCH_ROLE_UNSET;
        md.ingress_port_kind = PORT_KIND_UNSET;
        md.initial_hop_limit = 0;
        md.lb_mode = LB_MODE_ECMP;
        md.use_qp_in_hash = 0;
        md.flowlet_timeout_us = 0;
        md.feedback_every_n = 0;
        md.report_enabled = 0;
        md.control_qid = 0;
        md.feedback_qid = 0;
        md.flow_slot = 0;
        md.has_path = false;
        md.push_shim = false;
        md.end_path = false;
        md.int_enabled = 0;
        md.path_tag = 0;
        md.path_kind = PATH_KIND_PLANNED;
        md.planned_tag = 0;
        md.planned_hit = false;
        md.dst_leaf_hit = false;
        md.dst_leaf = 0;
        md.path_bucket = 0;
        md.int_sample_mask = 0;
        md.int_sample_gap_us = 0;
        md.int_sample_cutoff = 0;
        md.route_kind = 0;
        md.route_port = 0;
        md.route_src_mac = 0;
        md.route_dst_mac = 0;
        md.strip_shim = false;
        md.mirror_session = 0;
        md.now_ticks = 0;
        md.flowlet_cutoff = 0;
        md.feedback_every_n_minus_1 = 0;
        md.mirror_md.setInvalid();
        transition select(ig_intr_md.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }

    state parse_packet_out {
        pkt.extract(hdr.packet_out);
        transition parse_ethernet;
    }

    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_ICE: parse_ice_shim;
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_ARP: parse_arp;
            default: accept;
        }
    }

    state parse_arp {
        pkt.extract(hdr.arp);
        transition accept;
    }

    state parse_ice_shim {
        pkt.extract(hdr.ice_shim);
        transition select(hdr.ice_shim.version, hdr.ice_shim.orig_ether_type,
                          hdr.ice_shim.int_hop_count) {
            (ICE_VERSION, ETHERTYPE_IPV4, 0): parse_ipv4;
            (ICE_VERSION, ETHERTYPE_IPV4, 1 .. ICE_TNA_INT_MAX_HOPS): parse_int_1;
            default: malformed;   // bad version, inner type, or more than ICE_TNA_INT_MAX_HOPS records
        }
    }

    // One state per record, each extracting its own stack slot (bf-p4c allows one write per
    // field per packet, so a shared chain entered at different depths with .next is refused),
    // leaving for IPv4 after the shim's count of records.
    state parse_int_1 {
        pkt.extract(hdr.int_hops[0]);
        transition select(hdr.ice_shim.int_hop_count) {
            1: parse_ipv4;
            default: parse_int_2;
        }
    }

    state parse_int_2 {
        pkt.extract(hdr.int_hops[1]);
        transition select(hdr.ice_shim.int_hop_count) {
            2: parse_ipv4;
            default: parse_int_3;
        }
    }

#if ICE_TNA_INT_MAX_HOPS == 3
    state parse_int_3 {
        pkt.extract(hdr.int_hops[2]);
        transition parse_ipv4;
    }
#else
    state parse_int_3 {
        pkt.extract(hdr.int_hops[2]);
        transition select(hdr.ice_shim.int_hop_count) {
            3: parse_ipv4;
            default: parse_int_4;
        }
    }

    state parse_int_4 {
        pkt.extract(hdr.int_hops[3]);
        transition select(hdr.ice_shim.int_hop_count) {
            4: parse_ipv4;
            default: parse_int_5;
        }
    }

    state parse_int_5 {
        pkt.extract(hdr.int_hops[4]);
        transition parse_ipv4;
    }
#endif

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        ipv4_checksum.add(hdr.ipv4);
        // ihl - 5 words of options: the counter is loaded with ihl (4 bits) plus -5 here, in the
        // state that extracts ihl (loaded in a state of its own, bf-p4c merges that state into
        // the next and reads ihl at a negative offset: "Shifting extract to negative position").
        option_words.set(hdr.ipv4.ihl, 15, 0, 3, 8w251);
        transition select(hdr.ipv4.version, hdr.ipv4.ihl) {
            (4, 5): parse_ipv4_ihl_5;
            (4, 6): parse_ipv4_ihl_6;
            (4, 7): parse_ipv4_ihl_7;
            (4, 8): parse_ipv4_ihl_8;
            (4, 9): parse_ipv4_ihl_9;
            (4, 10): parse_ipv4_ihl_10;
            (4, 11): parse_ipv4_ihl_11;
            (4, 12): parse_ipv4_ihl_12;
            (4, 13): parse_ipv4_ihl_13;
            (4, 14): parse_ipv4_ihl_14;
            (4, 15): parse_ipv4_ihl_15;
            default: malformed;
        }
    }

    // The header's length in bytes (ihl * 4) as a constant per ihl: the parser writes
    // constants for nothing, where the ingress would spend a stage on the shift before the
    // length checks, which every forwarding decision waits for.
    state parse_ipv4_ihl_5 {
        md.ipv4_hdr_bytes = 20;
        transition parse_ipv4_done;
    }

    state parse_ipv4_ihl_6 {
        md.ipv4_hdr_bytes = 24;
        transition parse_ipv4_option_word;
    }

    state parse_ipv4_ihl_7 {
        md.ipv4_hdr_bytes = 28;
        transition parse_ipv4_option_word;
    }

    state parse_ipv4_ihl_8 {
        md.ipv4_hdr_bytes = 32;
        transition parse_ipv4_option_word;
    }

    state parse_ipv4_ihl_9 {
        md.ipv4_hdr_bytes = 36;
        transition parse_ipv4_option_word;
    }

    state parse_ipv4_ihl_10 {
        md.ipv4_hdr_bytes = 40;
        transition parse_ipv4_option_word;
    }

    state parse_ipv4_ihl_11 {
        md.ipv4_hdr_bytes = 44;
        transition parse_ipv4_option_word;
    }

    state parse_ipv4_ihl_12 {
        md.ipv4_hdr_bytes = 48;
        transition parse_ipv4_option_word;
    }

    state parse_ipv4_ihl_13 {
        md.ipv4_hdr_bytes = 52;
        transition parse_ipv4_option_word;
    }

    state parse_ipv4_ihl_14 {
        md.ipv4_hdr_bytes = 56;
        transition parse_ipv4_option_word;
    }

    state parse_ipv4_ihl_15 {
        md.ipv4_hdr_bytes = 60;
        transition parse_ipv4_option_word;
    }

    state parse_ipv4_option_word {
        pkt.extract(hdr.ipv4_options.next);
        ipv4_checksum.add(hdr.ipv4_options.last);
        option_words.decrement(1);
        transition select(option_words.is_zero()) {
            true: parse_ipv4_done;
            false: parse_ipv4_option_word;
        }
    }

    state parse_ipv4_done {
        // The checksum unit writes its verdict once per packet: true when the ones' complement
        // sum over the header is not zero (bf-p4c's own name for it is an error flag, "err =
        // checksum.verify()"; tna.p4's comment says the opposite).  Tofino 2 cannot negate in
        // the parser, and a second write of this field (an initial false) is refused, so
        // ingress reads it only for IPv4 packets.
        md.checksum_error = ipv4_checksum.verify();
        // Only the first fragment carries the UDP header.
        transition select(hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (0, IP_PROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        pkt.extract(hdr.udp);
        transition select(hdr.udp.length, hdr.udp.dst_port) {
            (0 .. 7, _): malformed;
            (_, UDP_PORT_ROCEV2): parse_bth;
            default: accept;
        }
    }

    state parse_bth {
        pkt.extract(hdr.bth);
        transition accept;
    }

    state malformed {
        md.drop_reason = DROP_REASON_PARSER_ERROR;
        transition accept;
    }
}

// Egress parser: what ingress put in front of the packet says what it is (a data packet with
// its bridged header, or the last hop's copy with its mirror header), then only as far as
// egress needs, never past the 160 bytes Tofino 1's egress parser may look at (27 of them are
// the intrinsic metadata):
// * data packets: Ethernet, the shim, and the INT records up to ICE_TNA_EGRESS_RECORDS, then
//   IPv4 when its header has no options (ECN rewrites it and the deparser recomputes its
//   checksum over those 20 bytes); with more records or with options egress stops earlier and
//   only pushes its INT record (it needs the shim alone) without ECN marking;
// * last-hop copies: Ethernet and the shim; the records behind the shim stay payload and go out
//   as they are behind the feedback/report headers, the flow fields come in the mirror header;
// * punts: the packet_in header ingress built; the frame behind it is payload.
// The last hop's data packet arrives without shim (ingress removed it), so egress sees IPv4.
// Ingress already checked everything; nothing here rejects but an unknown first byte.
parser IceTnaEgressParser(packet_in pkt,
                          out ice_egress_headers_t hdr,
                          out ice_egress_metadata_t md,
                          out egress_intrinsic_metadata_t eg_intr_md) {

    state start {
        pkt.extract(eg_intr_md);
        md.ecn_enabled = false;
        md.ecn_kmin = 0;
        md.ecn_kmax = 0;
        md.ecn_pmax_mask = 0;
        md.link_rate_mbps = 0;
        md.report_every_n = 0;
        md.report_qdepth_threshold = 0;
        md.feedback_src_mac = 0;
        md.feedback_dst_mac = 0;
        transition select(pkt.lookahead<bit<8>>()) {
            ICE_MD_BRIDGED: parse_bridged;
            ICE_MD_MIRROR: parse_mirror;
            default: reject;
        }
    }

    state parse_bridged {
        pkt.extract(hdr.bridged);
        transition select(hdr.bridged.to_cpu) {
            1: parse_packet_in;
            default: parse_ethernet;
        }
    }

    // A punt: ingress built the packet_in header; egress passes the frame on untouched.
    state parse_packet_in {
        pkt.extract(hdr.packet_in);
        transition accept;
    }

    // The mirror engine puts the mirror header in front of a copy of the packet as it entered
    // ingress (bridged metadata is not part of a mirrored copy).
    state parse_mirror {
        pkt.extract(hdr.mirror_md);
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_ICE: parse_copy_shim;
            default: accept;
        }
    }

    state parse_copy_shim {
        pkt.extract(hdr.ice_shim);
        transition accept;
    }

    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_ICE: parse_ice_shim;
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ice_shim {
        pkt.extract(hdr.ice_shim);
        transition select(hdr.ice_shim.int_hop_count) {
            0: parse_ipv4;
            1 .. ICE_TNA_EGRESS_RECORDS: parse_int_1;
            default: accept;   // records beyond what egress may parse: shim only
        }
    }

    // As in the ingress parser: one state per stack slot, each extracted once.
    state parse_int_1 {
        pkt.extract(hdr.int_hops[0]);
        transition select(hdr.ice_shim.int_hop_count) {
            1: parse_ipv4;
            default: parse_int_2;
        }
    }

#if ICE_TNA_EGRESS_RECORDS >= 4
    state parse_int_2 {
        pkt.extract(hdr.int_hops[1]);
        transition select(hdr.ice_shim.int_hop_count) {
            2: parse_ipv4;
            default: parse_int_3;
        }
    }

    state parse_int_3 {
        pkt.extract(hdr.int_hops[2]);
        transition select(hdr.ice_shim.int_hop_count) {
            3: parse_ipv4;
            default: parse_int_4;
        }
    }

    state parse_int_4 {
        pkt.extract(hdr.int_hops[3]);
        transition parse_ipv4;
    }
#else
    state parse_int_2 {
        pkt.extract(hdr.int_hops[1]);
        transition parse_ipv4;
    }
#endif

    // IPv4 without options only (version 4, ihl 5): see above.
    state parse_ipv4 {
        transition select(pkt.lookahead<bit<8>>()) {
            0x45: parse_ipv4_header;
            default: accept;
        }
    }

    state parse_ipv4_header {
        pkt.extract(hdr.ipv4);
        transition accept;
    }
}

#endif  // ICE_TNA_PARSER_P4
