#ifndef ICE_LOAD_BALANCE_P4
#define ICE_LOAD_BALANCE_P4

// Picks one of PATH_BUCKETS candidate buckets of the destination leaf for an unplanned flow:
// by flowlet (LB_MODE_PLANNED_FLOWLET) or by a flow hash (ECMP, every other mode).
//
// Flowlet: per flow slot, a register of the last time a packet of the slot was seen and one of
// the bucket it was given.  When the idle gap exceeds the controller's timeout the slot picks
// again with a hash that includes the current time, so the new pick is independent of the old
// one; path weights come from how many buckets the controller gives each path in
// path_candidate.  Buckets come from crc32: BMv2's crc16 (CRC-16/ARC) moves only a few low
// output bits when just the last input bytes (ports, QP) differ, which a modulo-64 bucket then
// maps onto a handful of paths.  A last-seen value of 0 means "never seen" (timestamps start above 0 on
// BMv2; tests start the manual clock above 0).
// Applied by PathSelect for RoCEv2 packets only (hdr.bth valid, so ipv4 and udp are too): no
// hash input reads a field of an invalid header.
control LoadBalance(in ice_ingress_headers_t hdr,
                    inout ice_ingress_metadata_t md) {

    register<bit<48>, bit<32>>(FLOW_STATE_SLOTS) flowlet_last_seen;
    register<bit<8>, bit<32>>(FLOW_STATE_SLOTS) flowlet_bucket;

    apply {
        if (md.lb_mode == LB_MODE_PLANNED_FLOWLET) {
            bit<48> now = md.now_us;
            bit<48> last_seen;
            bit<8> bucket;
            flowlet_last_seen.read(last_seen, md.flow_slot);
            flowlet_bucket.read(bucket, md.flow_slot);
            if (last_seen == 0 || now - last_seen > (bit<48>)md.flowlet_timeout_us) {
                hash(bucket, HashAlgorithm.crc32, 8w0,
                     { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.udp.src_port,
                       hdr.udp.dst_port, hdr.bth.dst_qp, now },
                     (bit<16>)PATH_BUCKETS);
                flowlet_bucket.write(md.flow_slot, bucket);
            }
            flowlet_last_seen.write(md.flow_slot, now);
            md.path_bucket = bucket;
            md.path_kind = PATH_KIND_FLOWLET;
        } else {
            // E-ECMP: RDMA NICs reuse one UDP source port for many QPs, so the destination QP
            // separates flows that the 5-tuple alone would pin together.
            if (md.use_qp_in_hash == 1) {
                hash(md.path_bucket, HashAlgorithm.crc32, 8w0,
                     { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol,
                       hdr.udp.src_port, hdr.udp.dst_port, hdr.bth.dst_qp },
                     (bit<16>)PATH_BUCKETS);
            } else {
                hash(md.path_bucket, HashAlgorithm.crc32, 8w0,
                     { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol,
                       hdr.udp.src_port, hdr.udp.dst_port },
                     (bit<16>)PATH_BUCKETS);
            }
            md.path_kind = PATH_KIND_ECMP;
        }
    }
}

#endif  // ICE_LOAD_BALANCE_P4
