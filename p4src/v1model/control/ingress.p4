#ifndef ICE_INGRESS_P4
#define ICE_INGRESS_P4

// Ingress wiring.  Every drop decision only sets md.drop_reason; the one place at the end
// marks the packet and counts it, so no later step can resurrect a dropped packet and every
// drop is counted exactly once.
control IceIngress(inout headers_t hdr,
                   inout local_metadata_t md,
                   inout standard_metadata_t standard_metadata) {

    // Indexed by ingress port: every packet that arrives, good or bad.
    counter<bit<32>>(PORT_SLOTS, CounterType.packets_and_bytes) port_rx_counter;
    // Indexed by DROP_REASON_*.
    counter<bit<32>>(DROP_REASON_SLOTS, CounterType.packets_and_bytes) drop_reason_counter;
    // Indexed by ingress port: DCQCN's CNPs (fixed-size RoCEv2 opcode 0x81) that arrived, so an
    // operator sees where congestion feedback flows without a NIC counter.
    counter<bit<32>>(PORT_SLOTS, CounterType.packets) cnp_rx_counter;

    SwitchConfig() config;
    ArpResponder() arp;
    PathSelect() path_select;
    TagSwitch() tag_switch;
    Ipv4Routing() routing;
    LastHop() last_hop;

    action send_packet_out() {
        standard_metadata.egress_spec = hdr.packet_out.egress_port;
        standard_metadata.priority = md.control_priority;  // probes must not wait behind data
        hdr.packet_out.setInvalid();
    }

    // The controller sends an LLDP frame out of every fabric port (packet-out) and expects it
    // back from the switch at the other end; a link whose probes stop arriving is down.
    action punt_link_probe() {
        standard_metadata.egress_spec = CPU_PORT;
        standard_metadata.priority = md.control_priority;
        fill_packet_in(hdr.packet_in, standard_metadata.ingress_port, 0, PUNT_REASON_LINK_PROBE);
    }

    action set_queue_priorities(bit<3> control_prio, bit<3> feedback_prio) {
        md.control_priority = control_prio;
        md.feedback_priority = feedback_prio;
    }

    // Keyless, written by the controller only when the switch has priority queues (the
    // topology spec's defaults.priority_queues, e.g. 8: control 7, feedback 6).  Left at its
    // default, every packet stays in queue PRIORITY_DATA, which a single-queue BMv2 accepts.
    table queue_config {
        key = { }
        actions = {
            set_queue_priorities;
            NoAction;
        }
        default_action = NoAction();
        size = 1;
    }

    action compute_flow_slot() {
        hash(md.flow_slot, HashAlgorithm.crc32, 32w0,
             { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol,
               hdr.udp.src_port, hdr.udp.dst_port, hdr.bth.dst_qp },
             (bit<32>)FLOW_STATE_SLOTS);
    }

    apply {
        md.now_us = standard_metadata.ingress_global_timestamp;
        queue_config.apply();
        port_rx_counter.count((bit<32>)standard_metadata.ingress_port);
        if (hdr.packet_out.isValid()) {
            send_packet_out();
        } else if (standard_metadata.parser_error == error.PacketTooShort) {
            md.drop_reason = DROP_REASON_TRUNCATED;
        } else if (standard_metadata.parser_error != error.NoError) {
            md.drop_reason = DROP_REASON_PARSER_ERROR;
        } else if (standard_metadata.checksum_error == 1) {
            md.drop_reason = DROP_REASON_BAD_CHECKSUM;
        } else if (hdr.ethernet.ether_type == ETHERTYPE_LLDP) {
            // Link probes are for the controller only: LLDP is never forwarded (802.1AB
            // frames are link-local), whatever the port kind or the switch's configuration.
            punt_link_probe();
        } else {
            config.apply(md, standard_metadata.ingress_port);
            if (hdr.arp.isValid()) {
                arp.apply(hdr, standard_metadata.ingress_port, standard_metadata.egress_spec);
            } else if (hdr.ipv4.isValid()) {
                // Lengths the parser cannot check: the IPv4 packet must fit in the frame (Ethernet
                // padding may follow it), the UDP datagram in the IPv4 packet.
                bit<32> l3_offset = ETHERNET_BYTES;
                if (hdr.ice_shim.isValid()) {
                    l3_offset = l3_offset + ICE_SHIM_BYTES
                        + ((bit<32>)hdr.ice_shim.int_hop_count << 5)
                        + ((bit<32>)hdr.ice_shim.int_hop_count << 2);
                }
                if (l3_offset + (bit<32>)hdr.ipv4.total_len > standard_metadata.packet_length) {
                    md.drop_reason = DROP_REASON_BAD_LENGTH;
                } else if (hdr.udp.isValid() && (bit<32>)hdr.udp.length
                        + ((bit<32>)hdr.ipv4.ihl << 2) > (bit<32>)hdr.ipv4.total_len) {
                    md.drop_reason = DROP_REASON_BAD_LENGTH;
                } else if (hdr.ice_shim.isValid() && md.ingress_port_kind == PORT_KIND_HOST) {
                    md.drop_reason = DROP_REASON_SHIM_FROM_HOST;
                }

                if (md.drop_reason == DROP_REASON_NONE) {
                    // ICE feedback from another switch: ahead of data (below the probes) on this
                    // hop.  The last hop's own I2E copy cannot be raised here (a clone's metadata
                    // is reset): its clone session's class of service is its queue, which the
                    // controller sets where the target honours it (control/fabric_targets.py).
                    if (hdr.udp.isValid() && hdr.udp.dst_port == UDP_PORT_ICE_FEEDBACK
                            && md.ingress_port_kind == PORT_KIND_FABRIC) {
                        standard_metadata.priority = md.feedback_priority;
                    }
                    // A CNP is DCQCN's feedback: in the same queue as ICE's, from the first
                    // switch on (NICs send CNPs in a high-priority class).  Behind data on a
                    // congested reverse-path port it would reach its sender tens of queued
                    // packets late and the rate cuts would lag.  Only the fixed-size CNP:
                    // a larger packet with the opcode stays with the data.
                    if (hdr.bth.isValid() && hdr.bth.opcode == ROCE_OP_CNP
                            && hdr.ipv4.total_len == ROCE_CNP_IPV4_BYTES) {
                        standard_metadata.priority = md.feedback_priority;
                        cnp_rx_counter.count((bit<32>)standard_metadata.ingress_port);
                    }
                    if (hdr.bth.isValid()) {
                        compute_flow_slot();
                    }
                    if (hdr.ice_shim.isValid()) {
                        md.path_tag = hdr.ice_shim.path_tag;
                        md.has_path = true;
                    } else if (hdr.bth.isValid() && md.switch_role == SWITCH_ROLE_LEAF
                            && md.ingress_port_kind == PORT_KIND_HOST) {
                        path_select.apply(hdr, md);
                    }
                    if (md.has_path) {
                        tag_switch.apply(hdr, md, standard_metadata.egress_spec);
                    }
                    if (md.drop_reason == DROP_REASON_NONE && (!md.has_path || md.end_path)) {
                        routing.apply(hdr, md, standard_metadata.ingress_port, standard_metadata.egress_spec);
                    }
                    if (md.drop_reason == DROP_REASON_NONE && md.strip_shim && md.routed) {
                        last_hop.apply(hdr, md, standard_metadata);
                    }
                }
            } else {
                md.drop_reason = DROP_REASON_UNSUPPORTED;
            }
        }

        if (md.drop_reason != DROP_REASON_NONE) {
            mark_to_drop(standard_metadata);
            drop_reason_counter.count((bit<32>)md.drop_reason);
        }
    }
}

#endif  // ICE_INGRESS_P4
