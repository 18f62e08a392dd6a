#ifndef ICE_INT_P4
#define ICE_INT_P4

// Per-port statistics and INT hop records.
//
// Data packets: update the egress port's transmitted-byte register and latest queue depths,
// then, for a shimmed packet with INT on, push this hop's record on the front of the stack
// (newest first).  A hop does not push when the stack already holds INT_MAX_HOPS - 1 records,
// which keeps one slot for the last hop's record in the feedback.
//
// Last-hop copies (feedback/report): build the last hop's own record from the host port's
// registers and put it in front of the records the packet carried, in hdr.fb_hops (emitted
// after the feedback or report header).
control IntTelemetry(inout headers_t hdr,
                     inout local_metadata_t md,
                     inout standard_metadata_t standard_metadata) {

    register<bit<64>, bit<32>>(PORT_SLOTS) port_tx_bytes;
    register<bit<32>, bit<32>>(PORT_SLOTS) port_enq_qdepth;
    register<bit<32>, bit<32>>(PORT_SLOTS) port_deq_qdepth;

    bit<64> tx_bytes;
    bit<32> enq_qdepth;
    bit<32> deq_qdepth;
    bit<16> record_ingress_port;

    action set_link_rate(bit<32> rate_mbps) {
        md.link_rate_mbps = rate_mbps;
    }

    // Written by the controller: the configured rate of every port, reported in INT records.
    table egress_port_info {
        key = {
            md.stats_port : exact @name("port");
        }
        actions = {
            set_link_rate;
            @defaultonly NoAction;
        }
        default_action = NoAction();
        size = EGRESS_PORT_TABLE_SIZE;
    }

    action push_int_hop() {
        hdr.int_hops.push_front(1);
        hdr.int_hops[0].setValid();
        hdr.int_hops[0].switch_id = md.switch_id;
        hdr.int_hops[0].ingress_port = record_ingress_port;
        hdr.int_hops[0].egress_port = (bit<16>)md.stats_port;
        hdr.int_hops[0].enq_qdepth = enq_qdepth;
        hdr.int_hops[0].deq_qdepth = deq_qdepth;
        hdr.int_hops[0].tx_bytes = tx_bytes;
        hdr.int_hops[0].egress_ts = (bit<64>)standard_metadata.egress_global_timestamp;
        hdr.int_hops[0].link_rate_mbps = md.link_rate_mbps;
        hdr.ice_shim.int_hop_count = hdr.ice_shim.int_hop_count + 1;
    }

    action build_feedback_hops() {
        hdr.fb_hops[1] = hdr.int_hops[0];
        hdr.fb_hops[2] = hdr.int_hops[1];
        hdr.fb_hops[3] = hdr.int_hops[2];
        hdr.fb_hops[4] = hdr.int_hops[3];
        hdr.fb_hops[0].setValid();
        hdr.fb_hops[0].switch_id = md.switch_id;
        hdr.fb_hops[0].ingress_port = record_ingress_port;
        hdr.fb_hops[0].egress_port = (bit<16>)md.stats_port;
        hdr.fb_hops[0].enq_qdepth = enq_qdepth;
        hdr.fb_hops[0].deq_qdepth = deq_qdepth;
        hdr.fb_hops[0].tx_bytes = tx_bytes;
        hdr.fb_hops[0].egress_ts = (bit<64>)standard_metadata.egress_global_timestamp;
        hdr.fb_hops[0].link_rate_mbps = md.link_rate_mbps;
    }

    apply {
        if (md.is_copy) {
            md.stats_port = md.host_port;
            record_ingress_port = (bit<16>)md.orig_ingress_port;
            port_tx_bytes.read(tx_bytes, (bit<32>)md.host_port);
            port_enq_qdepth.read(enq_qdepth, (bit<32>)md.host_port);
            port_deq_qdepth.read(deq_qdepth, (bit<32>)md.host_port);
        } else {
            md.stats_port = standard_metadata.egress_port;
            record_ingress_port = (bit<16>)standard_metadata.ingress_port;
            port_tx_bytes.read(tx_bytes, (bit<32>)standard_metadata.egress_port);
            tx_bytes = tx_bytes + (bit<64>)standard_metadata.packet_length;
            port_tx_bytes.write((bit<32>)standard_metadata.egress_port, tx_bytes);
            enq_qdepth = (bit<32>)standard_metadata.enq_qdepth;
            deq_qdepth = (bit<32>)standard_metadata.deq_qdepth;
            port_enq_qdepth.write((bit<32>)standard_metadata.egress_port, enq_qdepth);
            port_deq_qdepth.write((bit<32>)standard_metadata.egress_port, deq_qdepth);
        }

        egress_port_info.apply();

        if (md.is_copy) {
            build_feedback_hops();
            md.fb_hop_count = 1;
            if (hdr.fb_hops[1].isValid()) {
                md.fb_hop_count = md.fb_hop_count + 1;
            }
            if (hdr.fb_hops[2].isValid()) {
                md.fb_hop_count = md.fb_hop_count + 1;
            }
            if (hdr.fb_hops[3].isValid()) {
                md.fb_hop_count = md.fb_hop_count + 1;
            }
            if (hdr.fb_hops[4].isValid()) {
                md.fb_hop_count = md.fb_hop_count + 1;
            }
        } else if (hdr.ice_shim.isValid() && hdr.ice_shim.int_enabled == 1 && !md.strip_shim
                && hdr.ice_shim.int_hop_count < INT_MAX_HOPS - 1) {
            push_int_hop();
        }
    }
}

#endif  // ICE_INT_P4
