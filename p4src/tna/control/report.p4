#ifndef ICE_TNA_REPORT_P4
#define ICE_TNA_REPORT_P4

// Turns a last-hop copy sent to the CPU port into a telemetry report (packet_in /
// telemetry_report_t / records) or drops it when none is due: the v1model ReportBuilder's
// format, sampling and alarm, with the count kept by one RegisterAction and the copy cut by the
// mirror session instead of truncate() (see FeedbackBuilder).  The flow's fields and the largest
// queue depth among the copy's records come from the mirror header (LastHop); the copy's
// records follow the report unparsed.
control ReportBuilder(inout ice_egress_headers_t hdr,
                      inout ice_egress_metadata_t md,
                      inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {

    Register<bit<32>, bit<12>>(FLOW_STATE_SLOTS, 0) report_pkt_count;
    // The flow's counter: a hash of the flow's fields from the mirror header (the ingress flow
    // slot does not fit in the 32-byte mirror header; any per-flow index serves a counter).
    Hash<bit<12>>(HashAlgorithm_t.CRC32) report_slot_hash;

    action report_slot() {
        md.report_slot = report_slot_hash.get({
            hdr.mirror_md.flow_src_addr, hdr.mirror_md.flow_dst_addr,
            hdr.mirror_md.flow_src_port, hdr.mirror_md.flow_dst_port,
            hdr.mirror_md.flow_dst_qp });
    }

    // Outputs the report reason it stands for (REPORT_REASON_SAMPLED or 0), so that the report
    // needs no further step to combine it with the alarm's.
    RegisterAction<bit<32>, bit<12>, bit<4>>(report_pkt_count) count_for_report = {
        void apply(inout bit<32> seen, out bit<4> due) {
            if (seen >= md.report_every_n_minus_1) {
                seen = 0;
                due = REPORT_REASON_SAMPLED;
            } else {
                seen = seen + 1;
                due = 0;
            }
        }
    };

    action set_report_config(bit<32> report_every_n, bit<32> qdepth_threshold) {
        md.report_every_n = report_every_n;
        md.report_qdepth_threshold = qdepth_threshold;
    }

    // Keyless: sample 1 in report_every_n (0: none), alarm above this queue depth (0: none).
    table report_config {
        key = { }
        actions = {
            set_report_config;
            NoAction;
        }
        default_action = NoAction();
        size = 1;
    }

    action copy_report_ports() {
        md.report_ingress_port = hdr.mirror_md.orig_ingress_port;
        md.report_host_port = hdr.mirror_md.host_port;
    }

    action report_every_n_minus_1() {
        md.report_every_n_minus_1 = md.report_every_n - 1;
    }

    // The queue alarm: max(this hop's, the records' largest) |-| threshold, non-zero above it
    // (a gateway compares with constants only).  This hop's depth is the one IntTelemetry put
    // in new_hop, taken from md.enq_qdepth where it comes from.
    action report_qdepth_max() {
        md.report_qdepth = max(md.enq_qdepth, hdr.mirror_md.records_max_qdepth);
    }

    action report_qdepth_over() {
        md.report_qdepth_over = md.report_qdepth |-| md.report_qdepth_threshold;
    }

    // Called directly only (never from a table), so it is not in the P4Info's table actions.
    action build_report() {
        fill_packet_in(hdr.packet_in, md.report_ingress_port, md.report_host_port,
                       PUNT_REASON_TELEMETRY);

        hdr.telemetry_report.setValid();
        hdr.telemetry_report.version = ICE_VERSION;
        hdr.telemetry_report.reason = md.report_reason;
        hdr.telemetry_report.hop_count = md.fb_hop_count;
        hdr.telemetry_report.path_tag = hdr.ice_shim.path_tag;
        hdr.telemetry_report.switch_id = hdr.mirror_md.switch_id;
        hdr.telemetry_report.flow_src_addr = hdr.mirror_md.flow_src_addr;
        hdr.telemetry_report.flow_dst_addr = hdr.mirror_md.flow_dst_addr;
        hdr.telemetry_report.flow_src_port = hdr.mirror_md.flow_src_port;
        hdr.telemetry_report.flow_dst_port = hdr.mirror_md.flow_dst_port;
        hdr.telemetry_report._reserved1 = 0;
        hdr.telemetry_report.flow_dst_qp = hdr.mirror_md.flow_dst_qp;
        hdr.telemetry_report.bth_opcode = hdr.mirror_md.bth_opcode;
        hdr.telemetry_report.bth_psn = hdr.mirror_md.bth_psn;
        hdr.telemetry_report.timestamp = (bit<64>)md.now_us;    // see ice_mirror_md_t

        hdr.ethernet.setInvalid();
        hdr.ice_shim.setInvalid();
    }

    // Everything the verdicts need is computed for every copy first, unconditionally: on
    // Tofino each step that reads what the one before wrote waits a stage, and the report is
    // the egress's longest chain.
    apply {
        report_config.apply();
        copy_report_ports();
        report_slot();
        report_every_n_minus_1();
        report_qdepth_max();
        report_qdepth_over();
        if (md.report_every_n != 0) {
            md.report_reason = count_for_report.execute(md.report_slot);
        } else {
            md.report_reason = 0;
        }
        if (md.report_qdepth_threshold != 0 && md.report_qdepth_over != 0) {
            md.report_reason = md.report_reason | REPORT_REASON_QUEUE_ALARM;
        }
        if (md.report_reason == 0) {
            eg_dprsr_md.drop_ctl = 1;
        } else {
            build_report();
        }
    }
}

#endif  // ICE_TNA_REPORT_P4
