#ifndef ICE_TNA_FEEDBACK_P4
#define ICE_TNA_FEEDBACK_P4

// Turns a last-hop copy leaving on a fabric port into the feedback packet for the sender, with
// the v1model FeedbackBuilder's wire format:
//   Ethernet / IPv4 (flow dst -> flow src) / UDP (UDP_PORT_ICE_FEEDBACK) / ice_feedback_t /
//   int_hop_t * hop_count (last hop first)
// The new IPv4/UDP headers are fb_ipv4/fb_udp, emitted in front of the records (see
// ice_egress_headers_t); the copy's shim is removed, and the flow's fields come from the mirror
// header (the copy's own IPv4/UDP/BTH lie behind the records, unparsed).  There is no
// truncate() in TNA: the mirror session cuts the copy (P4Runtime CloneSessionEntry
// packet_length_bytes, which the controller sets for Tofino), and the bytes that remain after
// the records (the data packet's IPv4, UDP, BTH and payload up to the cut) are padding beyond
// the feedback's IPv4 total length.
control FeedbackBuilder(inout ice_egress_headers_t hdr,
                        inout ice_egress_metadata_t md) {

    action set_feedback_config(mac_addr_t src_mac, mac_addr_t dst_mac) {
        md.feedback_src_mac = src_mac;
        md.feedback_dst_mac = dst_mac;
    }

    // Keyless: the MACs of the feedback frame on the link the clone session sends it out of.
    table feedback_config {
        key = { }
        actions = {
            set_feedback_config;
            NoAction;
        }
        default_action = NoAction();
        size = 1;
    }

    // UDP (8 + ICE_FEEDBACK_BYTES + records) and IPv4 (20 more) lengths for `records` records
    // of 36 bytes: this hop's and the copy's (the shim's count).  Called with constants, one
    // call per count: v1model multiplies with two shifts of the count, but on Tofino a shift of
    // the 8-bit count into a 16-bit length needs the count alone in a 16-bit container, which
    // a field of the shim cannot have.
    action feedback_lengths(bit<16> records) {
        md.fb_udp_len = records * 36 + (bit<16>)(UDP_BYTES + ICE_FEEDBACK_BYTES);
        md.fb_ipv4_len = records * 36 + (bit<16>)(IPV4_MIN_BYTES + UDP_BYTES + ICE_FEEDBACK_BYTES);
    }

    action build_feedback() {
        hdr.ice_feedback.setValid();
        hdr.ice_feedback.version = ICE_VERSION;
        hdr.ice_feedback.path_kind = hdr.ice_shim.path_kind;
        hdr.ice_feedback._reserved0 = 0;
        hdr.ice_feedback.hop_count = md.fb_hop_count;
        hdr.ice_feedback.path_tag = hdr.ice_shim.path_tag;
        hdr.ice_feedback.switch_id = hdr.mirror_md.switch_id;
        hdr.ice_feedback.flow_src_addr = hdr.mirror_md.flow_src_addr;
        hdr.ice_feedback.flow_dst_addr = hdr.mirror_md.flow_dst_addr;
        hdr.ice_feedback.flow_src_port = hdr.mirror_md.flow_src_port;
        hdr.ice_feedback.flow_dst_port = hdr.mirror_md.flow_dst_port;
        hdr.ice_feedback._reserved1 = 0;
        hdr.ice_feedback.flow_dst_qp = hdr.mirror_md.flow_dst_qp;
        hdr.ice_feedback.bth_opcode = hdr.mirror_md.bth_opcode;
        hdr.ice_feedback.bth_psn = hdr.mirror_md.bth_psn;
        hdr.ice_feedback.timestamp = (bit<64>)md.now_us;    // see ice_mirror_md_t

        hdr.fb_ipv4.setValid();
        hdr.fb_ipv4.version = 4;
        hdr.fb_ipv4.ihl = 5;
        hdr.fb_ipv4.dscp = ICE_FEEDBACK_DSCP;
        hdr.fb_ipv4.ecn = 0;
        hdr.fb_ipv4.total_len = md.fb_ipv4_len;
        hdr.fb_ipv4.identification = 0;
        hdr.fb_ipv4.flags = 0;
        hdr.fb_ipv4.frag_offset = 0;
        hdr.fb_ipv4.ttl = ICE_FEEDBACK_TTL;
        hdr.fb_ipv4.protocol = IP_PROTO_UDP;
        hdr.fb_ipv4.hdr_checksum = 0;
        hdr.fb_ipv4.src_addr = hdr.mirror_md.flow_dst_addr;
        hdr.fb_ipv4.dst_addr = hdr.mirror_md.flow_src_addr;

        hdr.fb_udp.setValid();
        hdr.fb_udp.src_port = UDP_PORT_ICE_FEEDBACK;
        hdr.fb_udp.dst_port = UDP_PORT_ICE_FEEDBACK;
        hdr.fb_udp.length = md.fb_udp_len;
        hdr.fb_udp.checksum = 0;   // optional over IPv4

        hdr.ethernet.src_addr = md.feedback_src_mac;
        hdr.ethernet.dst_addr = md.feedback_dst_mac;
        hdr.ethernet.ether_type = ETHERTYPE_IPV4;

        hdr.ice_shim.setInvalid();
    }

    apply {
        feedback_config.apply();
        if (hdr.ice_shim.int_hop_count == 0) {
            feedback_lengths(1);
        } else if (hdr.ice_shim.int_hop_count == 1) {
            feedback_lengths(2);
        } else if (hdr.ice_shim.int_hop_count == 2) {
            feedback_lengths(3);
        } else if (hdr.ice_shim.int_hop_count == 3) {
            feedback_lengths(4);
        } else if (hdr.ice_shim.int_hop_count == 4) {
            feedback_lengths(5);
        } else {
            // the most records the ingress parser accepts, plus this hop's
            feedback_lengths(INT_MAX_HOPS + 1);
        }
        build_feedback();
    }
}

#endif  // ICE_TNA_FEEDBACK_P4
