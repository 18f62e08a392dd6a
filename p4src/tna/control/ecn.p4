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

    // Indexed by egress port: packets this switch marked CE (as v1model's).
    Counter<bit<32>, PortId_t>(PORT_SLOTS, CounterType_t.PACKETS) ecn_marked_counter;

    action mark_ce() {
        hdr.ipv4.ecn = 3;
        ecn_marked_counter.count(eg_intr_md.egress_port);
    }

    // The ramp's operands, one operation per field and stage: the draw, Kmax - Kmin, how far
    // the queue is above Kmin and below Kmax.  Comparisons of two fields are saturating
    // subtractions (a |-| b is non-zero exactly when a > b): a Tofino gateway compares a field
    // with a constant only.
    action ecn_operands() {
        md.ecn_draw = draw.get();
        md.ecn_range = md.ecn_kmax - md.ecn_kmin;
        md.ecn_over = md.enq_qdepth |-| md.ecn_kmin;
        md.ecn_below_kmax = md.ecn_kmax |-| md.enq_qdepth;
    }

    action ecn_ramp() {
        md.ecn_range = md.ecn_draw & md.ecn_range;     // the ramp draw
        md.ecn_thin = md.ecn_draw >> 16;
    }

    action ecn_thin() {
        md.ecn_thin = md.ecn_thin & md.ecn_pmax_mask;  // the Pmax thinning draw
        md.ecn_hit = md.ecn_over |-| md.ecn_range;     // the ramp draw is below depth - Kmin
    }

    apply {
        // Only headers the egress parser read (IPv4 without options, see IceTnaEgressParser).
        if (hdr.ipv4.isValid() && (hdr.ipv4.ecn == 1 || hdr.ipv4.ecn == 2)) {
            ecn_config.apply();
            if (md.ecn_enabled) {
                ecn_operands();
                ecn_ramp();
                ecn_thin();
                if (md.ecn_below_kmax == 0) {
                    mark_ce();                  // depth >= Kmax
                } else if (md.ecn_hit != 0) {
                    if (md.ecn_thin == 0) {
                        mark_ce();              // Kmin < depth < Kmax, by the ramp and Pmax
                    }
                }
            }
        }
    }
}

#endif  // ICE_TNA_ECN_P4
