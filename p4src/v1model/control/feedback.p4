#ifndef ICE_FEEDBACK_P4
#define ICE_FEEDBACK_P4

// Turns a last-hop copy (leaving on a fabric port through clone session ICE_SESSION_FEEDBACK or
// ICE_SESSION_FEEDBACK_REPORT) into the feedback packet for the sender:
//   Ethernet / IPv4 (from the flow's destination to its source) / UDP (UDP_PORT_ICE_FEEDBACK)
//   / ice_feedback_t / int_hop_t * hop_count (last hop first)
// It is routed back like any IPv4 packet, and the payload of the data packet is cut off.
control FeedbackBuilder(inout headers_t hdr,
                        inout local_metadata_t md,
                        inout standard_metadata_t standard_metadata) {

    action set_feedback_config(mac_addr_t src_mac, mac_addr_t dst_mac) {
        md.feedback_src_mac = src_mac;
        md.feedback_dst_mac = dst_mac;
    }

    // Keyless, written by the controller: the MACs of the feedback frame on the link the clone
    // session sends it out of (this switch's MAC and its neighbour's).
    table feedback_config {
        key = { }
        actions = {
            set_feedback_config;
            NoAction;
        }
        default_action = NoAction();
        size = 1;
    }

    action build_feedback() {
        // Lengths in bytes; 36 * hop_count as two shifts.
        bit<16> records_bytes = ((bit<16>)md.fb_hop_count << 5) + ((bit<16>)md.fb_hop_count << 2);
        bit<16> udp_len = (bit<16>)UDP_BYTES + (bit<16>)ICE_FEEDBACK_BYTES + records_bytes;
        bit<16> ipv4_len = (bit<16>)IPV4_MIN_BYTES + udp_len;
        bit<32> frame_len = ETHERNET_BYTES + (bit<32>)ipv4_len;
        ipv4_addr_t flow_src = hdr.ipv4.src_addr;
        ipv4_addr_t flow_dst = hdr.ipv4.dst_addr;

        hdr.ice_feedback.setValid();
        hdr.ice_feedback.version = (bit<4>)ICE_VERSION;
        hdr.ice_feedback.path_kind = hdr.ice_shim.path_kind;
        hdr.ice_feedback._reserved0 = 0;
        hdr.ice_feedback.hop_count = md.fb_hop_count;
        hdr.ice_feedback.path_tag = hdr.ice_shim.path_tag;
        hdr.ice_feedback.switch_id = md.switch_id;
        hdr.ice_feedback.flow_src_addr = flow_src;
        hdr.ice_feedback.flow_dst_addr = flow_dst;
        hdr.ice_feedback.flow_src_port = hdr.udp.src_port;
        hdr.ice_feedback.flow_dst_port = hdr.udp.dst_port;
        hdr.ice_feedback._reserved1 = 0;
        hdr.ice_feedback.flow_dst_qp = hdr.bth.dst_qp;
        hdr.ice_feedback.bth_opcode = hdr.bth.opcode;
        hdr.ice_feedback.bth_psn = hdr.bth.psn;
        hdr.ice_feedback.timestamp = (bit<64>)md.last_hop_ts;

        hdr.ethernet.src_addr = md.feedback_src_mac;
        hdr.ethernet.dst_addr = md.feedback_dst_mac;
        hdr.ethernet.ether_type = ETHERTYPE_IPV4;
        hdr.ice_shim.setInvalid();
        hdr.int_hops[0].setInvalid();
        hdr.int_hops[1].setInvalid();
        hdr.int_hops[2].setInvalid();
        hdr.int_hops[3].setInvalid();
        hdr.int_hops[4].setInvalid();
        hdr.ipv4_options.setInvalid();
        hdr.bth.setInvalid();

        hdr.ipv4.ihl = 5;
        hdr.ipv4.dscp = ICE_FEEDBACK_DSCP;
        hdr.ipv4.ecn = 0;
        hdr.ipv4.total_len = ipv4_len;
        hdr.ipv4.identification = 0;
        hdr.ipv4.flags = 0;
        hdr.ipv4.frag_offset = 0;
        hdr.ipv4.ttl = ICE_FEEDBACK_TTL;
        hdr.ipv4.protocol = IP_PROTO_UDP;
        hdr.ipv4.src_addr = flow_dst;
        hdr.ipv4.dst_addr = flow_src;

        hdr.udp.src_port = UDP_PORT_ICE_FEEDBACK;
        hdr.udp.dst_port = UDP_PORT_ICE_FEEDBACK;
        hdr.udp.length = udp_len;
        hdr.udp.checksum = 0;   // optional over IPv4

        truncate(frame_len);
    }

    apply {
        feedback_config.apply();
        build_feedback();
    }
}

#endif  // ICE_FEEDBACK_P4
