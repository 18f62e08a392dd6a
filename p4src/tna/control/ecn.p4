#ifndef ICE_TNA_ECN_P4
#define ICE_TNA_ECN_P4

// RED-style ECN marking of ECT packets by the queue depth met at enqueue, with the v1model
// EcnMarker's table, action and parameters.  Tofino has no divider, so the ramp between Kmin and
// Kmax uses Kmax - Kmin as a mask over a random draw: with Kmax - Kmin = 2^k - 1 (the
// controller's default 20 - 5 = 15 is) the draw is uniform on [0, 2^k) and the packet is marked
// with probability (depth - Kmin) / 2^k, v1model's ramp to within one step; Pmax thinning is the
// same (upper bits of the draw & pmax_mask == 0).  Depths are in queue cells on Tofino.
control EcnMarker(inout ice_egress_headers_t hdr,
                  inout ice_egress_metadata_t md,
                  in egress_intrinsic_metadata_t eg_intr_md) {

    Random<bit<32>>() draw;

    action set_ecn_thresholds(bit<32> kmin, bit<32> kmax, bit<32> pmax_mask) {
        md.ecn_kmin = kmin;
        md.ecn_kmax = kmax;
        md.ecn_pmax_mask = pmax_mask;
        md.ecn_enabled = true;
    }

    // Per egress port, or for all ports through the default action.
    table ecn_config {
        key = {
            eg_intr_md.egress_port : exact @name("egress_port");
        }
        actions = {
            set_ecn_thresholds;
            NoAction;
        }
        default_action = NoAction();
        size = ECN_CONFIG_TABLE_SIZE;
    }

    action mark_ce() {
        hdr.ipv4.ecn = 3;
    }

    // The ramp's operands, each computed in an action of its own (one operation per field and
    // stage): the draw, Kmax - Kmin and how far the queue is above Kmin.
    action ecn_operands() {
        md.ecn_draw = draw.get();
        md.ecn_range = md.ecn_kmax - md.ecn_kmin;
        md.ecn_over = md.enq_qdepth - md.ecn_kmin;
    }

    action ecn_ramp() {
        md.ecn_range = md.ecn_draw & md.ecn_range;     // the ramp draw
        md.ecn_thin = md.ecn_draw >> 16;
    }

    action ecn_thin() {
        md.ecn_thin = md.ecn_thin & md.ecn_pmax_mask;  // the Pmax thinning draw
    }

    apply {
        // Only headers the egress parser read (IPv4 without options, see IceTnaEgressParser).
        if (hdr.ipv4.isValid() && (hdr.ipv4.ecn == 1 || hdr.ipv4.ecn == 2)) {
            ecn_config.apply();
            if (md.ecn_enabled) {
                if (md.enq_qdepth >= md.ecn_kmax) {
                    mark_ce();
                } else if (md.enq_qdepth > md.ecn_kmin) {
                    ecn_operands();
                    ecn_ramp();
                    ecn_thin();
                    if (md.ecn_range < md.ecn_over && md.ecn_thin == 0) {
                        mark_ce();
                    }
                }
            }
        }
    }
}

#endif  // ICE_TNA_ECN_P4
