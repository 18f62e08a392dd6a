#ifndef ICE_REPORT_P4
#define ICE_REPORT_P4

// Turns a last-hop copy sent to the CPU port (clone sessions ICE_SESSION_FEEDBACK_REPORT and
// ICE_SESSION_REPORT) into a telemetry report, or drops it when no report is due:
//   packet_in_t (reason PUNT_REASON_TELEMETRY) / telemetry_report_t / int_hop_t * hop_count
// A report is due every Nth copy of a flow (sampling), and always when a record in it shows a
// queue deeper than the controller's threshold (alarm).
control ReportBuilder(inout headers_t hdr,
                      inout local_metadata_t md,
                      inout standard_metadata_t standard_metadata) {

    register<bit<32>, bit<32>>(FLOW_STATE_SLOTS) report_pkt_count;

    action set_report_config(bit<32> report_every_n, bit<32> qdepth_threshold) {
        md.report_every_n = report_every_n;
        md.report_qdepth_threshold = qdepth_threshold;
    }

    // Keyless, written by the controller: sample 1 in report_every_n (0: no sampling) and the
    // queue depth (packets) above which every copy is reported (0: no alarm).
    table report_config {
        key = { }
        actions = {
            set_report_config;
            NoAction;
        }
        default_action = NoAction();
        size = 1;
    }

    action build_report(bit<4> reason) {
        bit<32> records_bytes = ((bit<32>)md.fb_hop_count << 5) + ((bit<32>)md.fb_hop_count << 2);

        fill_packet_in(hdr.packet_in, md.orig_ingress_port, md.host_port, PUNT_REASON_TELEMETRY);

        hdr.telemetry_report.setValid();
        hdr.telemetry_report.version = ICE_VERSION;
        hdr.telemetry_report.reason = reason;
        hdr.telemetry_report.hop_count = md.fb_hop_count;
        hdr.telemetry_report.path_tag = hdr.ice_shim.path_tag;
        hdr.telemetry_report.switch_id = md.switch_id;
        hdr.telemetry_report.flow_src_addr = hdr.ipv4.src_addr;
        hdr.telemetry_report.flow_dst_addr = hdr.ipv4.dst_addr;
        hdr.telemetry_report.flow_src_port = hdr.udp.src_port;
        hdr.telemetry_report.flow_dst_port = hdr.udp.dst_port;
        hdr.telemetry_report._reserved1 = 0;
        hdr.telemetry_report.flow_dst_qp = hdr.bth.dst_qp;
        hdr.telemetry_report.bth_opcode = hdr.bth.opcode;
        hdr.telemetry_report.bth_psn = hdr.bth.psn;
        hdr.telemetry_report.timestamp = (bit<64>)md.last_hop_ts;

        hdr.ethernet.setInvalid();
        hdr.ice_shim.setInvalid();
        hdr.int_hops[0].setInvalid();
        hdr.int_hops[1].setInvalid();
        hdr.int_hops[2].setInvalid();
        hdr.int_hops[3].setInvalid();
        hdr.int_hops[4].setInvalid();
        hdr.ipv4.setInvalid();
        hdr.ipv4_options.setInvalid();
        hdr.udp.setInvalid();
        hdr.bth.setInvalid();

        truncate(PACKET_IN_BYTES + TELEMETRY_REPORT_BYTES + records_bytes);
    }

    apply {
        report_config.apply();
        bit<4> reason = 0;
        if (md.report_every_n != 0) {
            bit<32> seen;
            report_pkt_count.read(seen, md.flow_slot);
            seen = seen + 1;
            if (seen >= md.report_every_n) {
                reason = reason | REPORT_REASON_SAMPLED;
                seen = 0;
            }
            report_pkt_count.write(md.flow_slot, seen);
        }
        if (md.report_qdepth_threshold != 0) {
            bool alarm = false;
            if (hdr.fb_hops[0].isValid() && hdr.fb_hops[0].enq_qdepth > md.report_qdepth_threshold) {
                alarm = true;
            }
            if (hdr.fb_hops[1].isValid() && hdr.fb_hops[1].enq_qdepth > md.report_qdepth_threshold) {
                alarm = true;
            }
            if (hdr.fb_hops[2].isValid() && hdr.fb_hops[2].enq_qdepth > md.report_qdepth_threshold) {
                alarm = true;
            }
            if (hdr.fb_hops[3].isValid() && hdr.fb_hops[3].enq_qdepth > md.report_qdepth_threshold) {
                alarm = true;
            }
            if (hdr.fb_hops[4].isValid() && hdr.fb_hops[4].enq_qdepth > md.report_qdepth_threshold) {
                alarm = true;
            }
            if (alarm) {
                reason = reason | REPORT_REASON_QUEUE_ALARM;
            }
        }
        if (reason == 0) {
            mark_to_drop(standard_metadata);
        } else {
            build_report(reason);
        }
    }
}

#endif  // ICE_REPORT_P4
