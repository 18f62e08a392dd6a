#ifndef ICE_INT_SAMPLER_P4
#define ICE_INT_SAMPLER_P4

// Whether a packet that may carry INT (int_policy said so) is sampled: 1 in N packets of a flow
// by its PSN, and also any packet of a flow that has gone md.int_sample_gap_us without a
// sample (0: no such floor).  The floor keeps feedback coming at least once per gap for a flow
// whatever its rate: with samples 1 in N packets only, a flow at 1/k of the line rate would
// be sampled k times less often in time and react k times later (p4src/README.md, "INT
// sampling").  The first packet a slot sees is always sampled (last = 0).
//
// Per flow slot the time of the last sample; every sample (by PSN or by the floor) restarts it.
// Applied by PathSelect, once int_sampling set the mask and the gap.
control IntSampler(in ice_ingress_headers_t hdr,
                   inout ice_ingress_metadata_t md) {

    register<bit<48>, bit<32>>(FLOW_STATE_SLOTS) int_last_sampled;

    apply {
        bool by_psn = ((hdr.bth.psn ^ (hdr.bth.psn >> PATH_BUCKET_BITS)) & md.int_sample_mask)
                      == 0;
        bit<48> last;
        int_last_sampled.read(last, md.flow_slot);
        bool by_time = md.int_sample_gap_us != 0
                       && (last == 0 || md.now_us - last >= (bit<48>)md.int_sample_gap_us);
        if (by_psn || by_time) {
            int_last_sampled.write(md.flow_slot, md.now_us);
        } else {
            md.int_enabled = 0;
        }
    }
}

#endif  // ICE_INT_SAMPLER_P4
