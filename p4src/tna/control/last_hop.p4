#ifndef ICE_TNA_LAST_HOP_P4
#define ICE_TNA_LAST_HOP_P4

// Last hop of a tagged packet with INT on: ask for the copy that egress turns into feedback
// and/or a report.  v1model clones I2E preserving a field list; TNA mirrors at the ingress
// deparser with a mirror header carrying the same fields.  A mirror session has one
// destination, so session ICE_SESSION_FEEDBACK_REPORT (feedback port + CPU port) is a mirror
// session towards a multicast group: P4Runtime's CloneSessionEntry with two replicas, which the
// switch's P4Runtime server (Stratum) realises that way, as PI does on BMv2.
control LastHop(in ice_ingress_headers_t hdr,
                inout ice_ingress_metadata_t md,
                in ingress_intrinsic_metadata_t ig_intr_md,
                inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                in ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    Register<bit<32>, bit<12>>(FLOW_STATE_SLOTS, 0) feedback_pkt_count;

    // Counts the flow's packets; due (1) on every feedback_every_n-th, and starts again.
    // md.feedback_every_n_minus_1 is computed before: the stateful ALU compares a cell with a
    // PHV value, it does not subtract one from it first.
    RegisterAction<bit<32>, bit<12>, bit<1>>(feedback_pkt_count) count_for_feedback = {
        void apply(inout bit<32> seen, out bit<1> due) {
            if (seen >= md.feedback_every_n_minus_1) {
                seen = 0;
                due = 1;
            } else {
                seen = seen + 1;
                due = 0;
            }
        }
    };

    // The copy's egress parser stops after the shim (ice_mirror_md_t), so the flow's fields
    // and the records' largest queue depth (md.rec_qdepth0, IceIngress.record_qdepths_*: the
    // report's queue alarm) travel in the mirror header.
    action fill_mirror_md() {
        md.mirror_md.setValid();
        md.mirror_md.md_kind = ICE_MD_MIRROR;
        md.mirror_md.host_port = ig_tm_md.ucast_egress_port;
        md.mirror_md.orig_ingress_port = ig_intr_md.ingress_port;
        md.mirror_md.switch_id = md.switch_id;
        md.mirror_md.flow_src_addr = hdr.ipv4.src_addr;
        md.mirror_md.flow_dst_addr = hdr.ipv4.dst_addr;
        md.mirror_md.flow_src_port = hdr.udp.src_port;
        md.mirror_md.flow_dst_port = hdr.udp.dst_port;
        md.mirror_md.flow_dst_qp = hdr.bth.dst_qp;
        md.mirror_md.bth_opcode = hdr.bth.opcode;
        md.mirror_md.bth_psn = hdr.bth.psn;
        md.mirror_md.records_max_qdepth = md.rec_qdepth0;
    }

    apply {
        if (hdr.ice_shim.int_enabled == 1) {
            // One write of feedback_due per branch (an initial 0 then the counter's would be
            // two writes in a row, a stage apart).
            bit<1> feedback_due;
            if (md.feedback_every_n != 0) {
                feedback_due = count_for_feedback.execute(md.flow_slot);
            } else {
                feedback_due = 0;
            }
            fill_mirror_md();
            if (feedback_due == 1 && md.report_enabled == 1) {
                md.mirror_session = (MirrorId_t)ICE_SESSION_FEEDBACK_REPORT;
                ig_dprsr_md.mirror_type = ICE_MIRROR_TYPE_LAST_HOP;
            } else if (feedback_due == 1) {
                md.mirror_session = (MirrorId_t)ICE_SESSION_FEEDBACK;
                ig_dprsr_md.mirror_type = ICE_MIRROR_TYPE_LAST_HOP;
            } else if (md.report_enabled == 1) {
                md.mirror_session = (MirrorId_t)ICE_SESSION_REPORT;
                ig_dprsr_md.mirror_type = ICE_MIRROR_TYPE_LAST_HOP;
            }
        }
    }
}

#endif  // ICE_TNA_LAST_HOP_P4
