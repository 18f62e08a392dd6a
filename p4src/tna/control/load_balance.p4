#ifndef ICE_TNA_LOAD_BALANCE_P4
#define ICE_TNA_LOAD_BALANCE_P4

// One of PATH_BUCKETS candidate buckets of the destination leaf for an unplanned flow, by
// flowlet or by ECMP hash, as the v1model LoadBalance.
//
// ECMP: the same CRC-32 over the same fields in the same order and widths as the v1model
// program; a Hash<bit<6>> keeps the low 6 bits of the CRC, which is v1model's crc32 % 64, so
// both targets put a flow in the same bucket and the controller's ECMP model
// (control/planner/ecmp.py) predicts both.  Not an ActionSelector: a selector's member choice is
// the target's own, so no model could predict it, and the bucket table keeps one controller
// code path (path weights = bucket counts) for every target.
//
// Flowlet: one RegisterAction per register and packet (Tofino's stateful ALU reads, decides and
// writes one cell per packet): the first says whether the flowlet expired and stamps the time,
// the second keeps or replaces the bucket.  Times are the ingress clock's 32-bit 1.024 us ticks
// (IceIngress.take_time; the controller writes the timeout in them too), so a slot idle for a multiple of ~73
// minutes may keep its old bucket once.
control LoadBalance(in ice_ingress_headers_t hdr,
                    inout ice_ingress_metadata_t md) {

    Hash<bit<6>>(HashAlgorithm_t.CRC32) ecmp_hash;
    Hash<bit<6>>(HashAlgorithm_t.CRC32) eecmp_hash;

    Register<bit<32>, bit<12>>(FLOW_STATE_SLOTS, 0) flowlet_last_seen;
    Register<bit<8>, bit<12>>(FLOW_STATE_SLOTS, 0) flowlet_bucket;

    // expired = never seen (0) or last seen before now - timeout; always stamps now.
    RegisterAction<bit<32>, bit<12>, bit<1>>(flowlet_last_seen) touch_flowlet = {
        void apply(inout bit<32> last_seen, out bit<1> expired) {
            if (last_seen == 0 || last_seen < md.flowlet_cutoff) {
                expired = 1;
            } else {
                expired = 0;
            }
            last_seen = md.now_ticks;
        }
    };

    RegisterAction<bit<8>, bit<12>, bit<8>>(flowlet_bucket) keep_bucket = {
        void apply(inout bit<8> bucket, out bit<8> result) {
            result = bucket;
        }
    };

    RegisterAction<bit<8>, bit<12>, bit<8>>(flowlet_bucket) replace_bucket = {
        void apply(inout bit<8> bucket, out bit<8> result) {
            bucket = md.flowlet_new_bucket;
            result = md.flowlet_new_bucket;
        }
    };

    apply {
        if (md.lb_mode == LB_MODE_PLANNED_FLOWLET) {
            bit<12> slot = md.flow_slot;
            // A new flowlet takes md.flowlet_new_bucket (IceIngress.flowlet_bucket: the hash of
            // the flow's fields and the time, computed for every packet beforehand).
            if (touch_flowlet.execute(slot) == 1) {
                md.path_bucket = replace_bucket.execute(slot);
            } else {
                md.path_bucket = keep_bucket.execute(slot);
            }
            md.path_kind = PATH_KIND_FLOWLET;
        } else {
            // E-ECMP: RDMA NICs reuse one UDP source port for many QPs.
            if (md.use_qp_in_hash == 1) {
                md.path_bucket = (bit<8>)eecmp_hash.get({
                    hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol,
                    hdr.udp.src_port, hdr.udp.dst_port, hdr.bth.dst_qp });
            } else {
                md.path_bucket = (bit<8>)ecmp_hash.get({
                    hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol,
                    hdr.udp.src_port, hdr.udp.dst_port });
            }
            md.path_kind = PATH_KIND_ECMP;
        }
    }
}

#endif  // ICE_TNA_LOAD_BALANCE_P4
