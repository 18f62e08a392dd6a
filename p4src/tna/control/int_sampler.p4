#ifndef ICE_TNA_INT_SAMPLER_P4
#define ICE_TNA_INT_SAMPLER_P4

// The v1model IntSampler on Tofino: 1 in N packets of a flow by PSN, and any packet of a flow
// that has gone the gap without a sample.  One RegisterAction per packet (Tofino's stateful
// ALU reads, decides and writes one cell per packet): a PSN-sampled packet only stamps the
// time, any other asks whether the slot's last sample is at or before now - gap and stamps it
// if so.  What it compares is computed for every packet at the start of the ingress
// (IceIngress: md.int_sample_psn = (psn ^ (psn >> PATH_BUCKET_BITS)) & mask, and
// md.int_sample_cutoff = now - gap), so that the stateful ALU runs in the stage after the
// policy.  Times are the ingress clock's 32-bit 1.024 us ticks (IceIngress.take_time).
control IntSampler(in ice_ingress_headers_t hdr,
                   inout ice_ingress_metadata_t md) {

    Register<bit<32>, bit<12>>(FLOW_STATE_SLOTS, 0) int_last_sampled;

    RegisterAction<bit<32>, bit<12>, bit<1>>(int_last_sampled) stamp = {
        void apply(inout bit<32> last, out bit<1> due) {
            last = md.now_ticks;
            due = 1;
        }
    };

    RegisterAction<bit<32>, bit<12>, bit<1>>(int_last_sampled) stamp_if_due = {
        void apply(inout bit<32> last, out bit<1> due) {
            if (last == 0 || last <= md.int_sample_cutoff) {
                last = md.now_ticks;
                due = 1;
            } else {
                due = 0;
            }
        }
    };

    // The verdict goes straight into md.int_enabled (1 from int_policy so far): a stateful
    // ALU's output lands in the PHV in its own stage, where an `if` on it would wait one more.
    apply {
        bit<12> slot = md.flow_slot;
        if (md.int_sample_psn == 0) {
            md.int_enabled = stamp.execute(slot);
        } else if (md.int_sample_gap_us != 0) {
            md.int_enabled = stamp_if_due.execute(slot);
        } else {
            md.int_enabled = 0;
        }
    }
}

#endif  // ICE_TNA_INT_SAMPLER_P4
