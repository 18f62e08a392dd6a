#ifndef ICE_TNA_INT_SAMPLER_P4
#define ICE_TNA_INT_SAMPLER_P4

// The v1model IntSampler on Tofino: 1 in N packets of a flow by PSN, and any packet of a flow
// that has gone the gap without a sample.  One RegisterAction per packet (Tofino's stateful
// ALU reads, decides and writes one cell per packet): a PSN-sampled packet only stamps the
// time, any other asks whether the slot's last sample is older than now - gap
// (md.int_sample_cutoff_us, computed before, as IceIngress computes the flowlet cutoff) and stamps it if
// so.  32-bit microseconds as LoadBalance's flowlet times.
control IntSampler(in ice_ingress_headers_t hdr,
                   inout ice_ingress_metadata_t md) {

    Register<bit<32>, bit<12>>(FLOW_STATE_SLOTS, 0) int_last_sampled;

    RegisterAction<bit<32>, bit<12>, bit<1>>(int_last_sampled) stamp = {
        void apply(inout bit<32> last, out bit<1> due) {
            last = md.now_us;
            due = 1;
        }
    };

    RegisterAction<bit<32>, bit<12>, bit<1>>(int_last_sampled) stamp_if_due = {
        void apply(inout bit<32> last, out bit<1> due) {
            if (last == 0 || last <= md.int_sample_cutoff_us) {
                last = md.now_us;
                due = 1;
            } else {
                due = 0;
            }
        }
    };

    // md.int_sample_psn is psn ^ (psn >> PATH_BUCKET_BITS) (IceIngress.mix_psn); the mask is
    // applied on the ALU: a gateway compares with constants only.
    action mask_psn() {
        md.int_sample_psn = md.int_sample_psn & md.int_sample_mask;
    }

    apply {
        bit<12> slot = md.flow_slot[11:0];
        md.int_sample_cutoff_us = md.now_us - md.int_sample_gap_us;
        mask_psn();
        if (md.int_sample_psn == 0) {
            stamp.execute(slot);
        } else if (md.int_sample_gap_us == 0 || stamp_if_due.execute(slot) == 0) {
            md.int_enabled = 0;
        }
    }
}

#endif  // ICE_TNA_INT_SAMPLER_P4
