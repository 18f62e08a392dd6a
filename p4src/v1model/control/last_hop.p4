#ifndef ICE_LAST_HOP_P4
#define ICE_LAST_HOP_P4

// Last hop of a tagged packet with INT on: ask for a copy that the egress turns into a feedback
// packet for the sender and/or a telemetry report for the controller (IceEgress).
//
// Why an ingress-to-egress clone: the original keeps its shim and INT records until its own
// egress strips them, so the clone (the packet as received, re-parsed, on simple_switch) still
// carries every earlier hop's record.  The last hop's own record is built in the copy's egress
// from the host port's statistics registers (latest queue depths and byte count), because the
// copy leaves on another port than the data packet.
control LastHop(inout headers_t hdr,
                inout local_metadata_t md,
                inout standard_metadata_t standard_metadata) {

    register<bit<32>, bit<32>>(FLOW_STATE_SLOTS) feedback_pkt_count;

    apply {
        if (hdr.ice_shim.int_enabled == 1) {
            bool feedback_due = false;
            if (md.feedback_every_n != 0) {
                bit<32> seen;
                feedback_pkt_count.read(seen, md.flow_slot);
                seen = seen + 1;
                if (seen >= (bit<32>)md.feedback_every_n) {
                    feedback_due = true;
                    seen = 0;
                }
                feedback_pkt_count.write(md.flow_slot, seen);
            }
            md.last_hop_copy = 1;
            md.host_port = standard_metadata.egress_spec;
            md.orig_ingress_port = standard_metadata.ingress_port;
            md.last_hop_ts = standard_metadata.ingress_global_timestamp;
            if (feedback_due && md.report_enabled == 1) {
                clone_preserving_field_list(CloneType.I2E, ICE_SESSION_FEEDBACK_REPORT, FL_LAST_HOP);
            } else if (feedback_due) {
                clone_preserving_field_list(CloneType.I2E, ICE_SESSION_FEEDBACK, FL_LAST_HOP);
            } else if (md.report_enabled == 1) {
                clone_preserving_field_list(CloneType.I2E, ICE_SESSION_REPORT, FL_LAST_HOP);
            }
        }
    }
}

#endif  // ICE_LAST_HOP_P4
