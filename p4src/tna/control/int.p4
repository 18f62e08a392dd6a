#ifndef ICE_TNA_INT_P4
#define ICE_TNA_INT_P4

// Per-port statistics and INT hop records, as the v1model IntTelemetry, with two differences
// Tofino forces:
// * registers hold at most 32 bits per cell, so the 64-bit transmitted-byte count is two
//   registers, the high word incremented when the low word wraps (each register is touched by
//   one RegisterAction per packet: update on data packets, read on last-hop copies);
// * this hop's record is not pushed on the front of a stack (that would copy every record):
//   it is the header new_hop, which the deparser emits in front of the records the packet
//   carried, so the wire layout (newest first) is the same.
// Queue depths are the traffic manager's, in cells (80 bytes on Tofino 1, 176 on Tofino 2), not
// in packets as on v1model; timestamps are 32-bit microseconds (see IceIngress.take_time).
control IntTelemetry(inout ice_egress_headers_t hdr,
                     inout ice_egress_metadata_t md,
                     in egress_intrinsic_metadata_t eg_intr_md,
                     in egress_intrinsic_metadata_from_parser_t eg_prsr_md) {

    Register<bit<32>, PortId_t>(PORT_SLOTS, 0) port_tx_bytes;
    Register<bit<32>, PortId_t>(PORT_SLOTS, 0) port_tx_bytes_hi;
    Register<bit<32>, PortId_t>(PORT_SLOTS, 0) port_enq_qdepth;
    Register<bit<32>, PortId_t>(PORT_SLOTS, 0) port_deq_qdepth;

    RegisterAction<bit<32>, PortId_t, bit<32>>(port_tx_bytes) add_tx_bytes = {
        void apply(inout bit<32> value, out bit<32> result) {
            value = value + md.pkt_len;
            result = value;
        }
    };
    RegisterAction<bit<32>, PortId_t, bit<32>>(port_tx_bytes) read_tx_bytes = {
        void apply(inout bit<32> value, out bit<32> result) {
            result = value;
        }
    };
    RegisterAction<bit<32>, PortId_t, bit<32>>(port_tx_bytes_hi) carry_tx_bytes = {
        void apply(inout bit<32> value, out bit<32> result) {
            value = value + 1;
            result = value;
        }
    };
    RegisterAction<bit<32>, PortId_t, bit<32>>(port_tx_bytes_hi) read_tx_bytes_hi = {
        void apply(inout bit<32> value, out bit<32> result) {
            result = value;
        }
    };
    RegisterAction<bit<32>, PortId_t, bit<32>>(port_enq_qdepth) write_enq_qdepth = {
        void apply(inout bit<32> value, out bit<32> result) {
            value = md.enq_qdepth;
            result = value;
        }
    };
    RegisterAction<bit<32>, PortId_t, bit<32>>(port_enq_qdepth) read_enq_qdepth = {
        void apply(inout bit<32> value, out bit<32> result) {
            result = value;
        }
    };
    RegisterAction<bit<32>, PortId_t, bit<32>>(port_deq_qdepth) write_deq_qdepth = {
        void apply(inout bit<32> value, out bit<32> result) {
            value = md.deq_qdepth;
            result = value;
        }
    };
    RegisterAction<bit<32>, PortId_t, bit<32>>(port_deq_qdepth) read_deq_qdepth = {
        void apply(inout bit<32> value, out bit<32> result) {
            result = value;
        }
    };

    action set_link_rate(bit<32> rate_mbps) {
        md.link_rate_mbps = rate_mbps;
    }

    // The configured rate of every port, reported in INT records.
    table egress_port_info {
        key = {
            md.stats_port : exact @name("port");
        }
        actions = {
            set_link_rate;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = EGRESS_PORT_TABLE_SIZE;
    }

    // As IceIngress.take_time_*: one operation per field and stage.
    // The shifted copies of the timestamp come from hash units (identity hashes of slices): a
    // PHV container cannot hold the 48-bit timestamp cut at bit 10 (it is parsed into whole
    // containers), and an action gets at most 32 bits from a hash unit, so one action each.
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) time_t0;
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) time_t6;
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) time_t7;
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) time_t11;

    action take_time_t0() {
        md.time.t0 = time_t0.get({ eg_prsr_md.global_tstamp[41:10] });
    }

    action take_time_t6() {
        md.time.t6 = time_t6.get({ eg_prsr_md.global_tstamp[41:16] });
    }

    action take_time_t7() {
        md.time.t7 = time_t7.get({ eg_prsr_md.global_tstamp[41:17] });
    }

    action take_time_t11() {
        md.time.t11 = time_t11.get({ eg_prsr_md.global_tstamp[41:21] });
    }

    action take_time_pairs() {
        md.time.t0 = md.time.t0 + md.time.t6;
        md.time.t7 = md.time.t7 + md.time.t11;
    }

    action take_time_sum() {
        md.now_us = md.time.t0 + md.time.t7;
    }

    // The low word wrapped when it is now below what was added (pkt_len |-| low != 0): a
    // gateway compares with constants only.
    action tx_bytes_wrapped() {
        md.tx_bytes_wrap = md.pkt_len |-| md.tx_bytes_lo;
    }

    action fill_new_hop(switch_id_t switch_id) {
        hdr.new_hop.setValid();
        hdr.new_hop.switch_id = switch_id;
        hdr.new_hop.ingress_port = md.record_ingress_port;
        hdr.new_hop.egress_port = (bit<16>)md.stats_port;
        hdr.new_hop.enq_qdepth = md.enq_qdepth;
        hdr.new_hop.deq_qdepth = md.deq_qdepth;
        hdr.new_hop.tx_bytes = md.tx_bytes_hi ++ md.tx_bytes_lo;
        hdr.new_hop.egress_ts = (bit<64>)md.now_us;
        hdr.new_hop.link_rate_mbps = md.link_rate_mbps;
    }

    apply {
        take_time_t0();
        take_time_t6();
        take_time_t7();
        take_time_t11();
        take_time_pairs();
        take_time_sum();
        if (md.is_copy) {
            md.stats_port = hdr.mirror_md.host_port;
            md.record_ingress_port = (bit<16>)hdr.mirror_md.orig_ingress_port;
            md.tx_bytes_lo = read_tx_bytes.execute(md.stats_port);
            md.tx_bytes_hi = read_tx_bytes_hi.execute(md.stats_port);
            md.enq_qdepth = read_enq_qdepth.execute(md.stats_port);
            md.deq_qdepth = read_deq_qdepth.execute(md.stats_port);
        } else {
            md.stats_port = eg_intr_md.egress_port;
            md.record_ingress_port = (bit<16>)hdr.bridged.ingress_port;
            md.pkt_len = (bit<32>)eg_intr_md.pkt_length;
            md.tx_bytes_lo = add_tx_bytes.execute(md.stats_port);
            tx_bytes_wrapped();
            if (md.tx_bytes_wrap != 0) {
                md.tx_bytes_hi = carry_tx_bytes.execute(md.stats_port);
            } else {
                md.tx_bytes_hi = read_tx_bytes_hi.execute(md.stats_port);
            }
            md.enq_qdepth = (bit<32>)eg_intr_md.enq_qdepth;
            md.deq_qdepth = (bit<32>)eg_intr_md.deq_qdepth;
            write_enq_qdepth.execute(md.stats_port);
            write_deq_qdepth.execute(md.stats_port);
        }

        egress_port_info.apply();

        if (md.is_copy) {
            // This hop's record, then the ones the copy carries (the shim's count; they stay
            // unparsed behind it, see IceTnaEgressParser).
            fill_new_hop(hdr.mirror_md.switch_id);
            md.fb_hop_count = hdr.ice_shim.int_hop_count + 1;
        } else if (hdr.ice_shim.isValid() && hdr.ice_shim.int_enabled == 1
                && hdr.ice_shim.int_hop_count < ICE_TNA_INT_MAX_HOPS - 1) {
            fill_new_hop(hdr.bridged.switch_id);
            hdr.ice_shim.int_hop_count = hdr.ice_shim.int_hop_count + 1;
        }
    }
}

#endif  // ICE_TNA_INT_P4
