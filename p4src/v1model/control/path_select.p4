#ifndef ICE_PATH_SELECT_P4
#define ICE_PATH_SELECT_P4

// First hop of a RoCEv2 packet from a host: choose the path tag.  Order: the controller's
// planned path for this flow, else a candidate path of the destination leaf chosen by
// LoadBalance, or by the PSN in spray mode (a path per packet; plans ignored, as in ECMP mode).  Then whether this packet carries INT hop records: its path kind must have INT
// (int_policy) and the packet must be sampled (int_sampling).  No dst_leaf entry (e.g. the destination hangs off this leaf) means no tag:
// the packet is routed as plain IPv4.
//
// Shared by both architectures; LoadBalance (flowlet registers, hashes) is each one's own
// (v1model/control/load_balance.p4, tna/control/load_balance.p4), with this same signature.
control PathSelect(in ice_ingress_headers_t hdr,
                   inout ice_ingress_metadata_t md) {

    LoadBalance() load_balance;
    IntSampler() int_sampler;

    action set_planned_path(path_tag_t path_tag) {
        md.path_tag = path_tag;
        md.path_kind = PATH_KIND_PLANNED;
        md.has_path = true;
    }

    // Written by the controller's planner for every planned flow (one entry per RoCEv2 QP).
    table flow_path {
        key = {
            hdr.ipv4.src_addr : exact @name("src_addr");
            hdr.ipv4.dst_addr : exact @name("dst_addr");
            hdr.udp.src_port  : exact @name("udp_src_port");
            hdr.bth.dst_qp    : exact @name("dst_qp");
        }
        actions = {
            set_planned_path;
            @defaultonly NoAction;
        }
        default_action = NoAction();
        size = FLOW_PATH_TABLE_SIZE;
    }

    action set_dst_leaf(leaf_id_t leaf_id) {
        md.dst_leaf = leaf_id;
        md.dst_leaf_hit = true;
    }

    // Written by the controller from the topology: host prefix -> the leaf it hangs off.
    table dst_leaf {
        key = {
            hdr.ipv4.dst_addr : lpm @name("dst_addr");
        }
        actions = {
            set_dst_leaf;
            @defaultonly NoAction;
        }
        default_action = NoAction();
        size = DST_LEAF_TABLE_SIZE;
    }

    action set_candidate_path(path_tag_t path_tag) {
        md.path_tag = path_tag;
        md.has_path = true;
    }

    // Written by the controller: for every destination leaf, all PATH_BUCKETS buckets, each
    // naming one candidate path; a path with weight w gets about w * PATH_BUCKETS buckets.
    table path_candidate {
        key = {
            md.dst_leaf    : exact @name("leaf_id");
            md.path_bucket : exact @name("bucket");
        }
        actions = {
            set_candidate_path;
            @defaultonly NoAction;
        }
        default_action = NoAction();
        size = PATH_CANDIDATE_TABLE_SIZE;
    }

    action enable_int() {
        md.int_enabled = 1;
    }

    action disable_int() {
        md.int_enabled = 0;
    }

    // Written by the controller: which flow classes (PATH_KIND_*) carry INT hop records.
    table int_policy {
        key = {
            md.path_kind : exact @name("path_kind");
        }
        actions = {
            enable_int;
            disable_int;
        }
        default_action = disable_int();
        size = INT_POLICY_TABLE_SIZE;
    }

    action set_int_sampling(bit<24> psn_mask, bit<32> max_gap_us) {
        md.int_sample_mask = psn_mask;
        md.int_sample_gap_us = max_gap_us;
    }

    // Keyless: INT records on 1 in N packets of a flow only, psn_mask = N - 1 (N a power of
    // two; the default, no entry or mask 0, samples every packet).  A packet is sampled when
    // ((psn ^ (psn >> PATH_BUCKET_BITS)) & psn_mask) == 0: exactly one in N of every
    // PATH_BUCKETS consecutive PSNs of an aligned block (N <= PATH_BUCKETS), and the sampled
    // offset moves by one from one block to the next, so that a choice of path by PSN mod
    // PATH_BUCKETS (spray) still sees every path sampled in turn; or when its flow has gone
    // max_gap_us without a sample (0: never; IntSampler).  Unsampled packets carry the
    // shim with int_enabled 0 and no record, and make neither feedback nor reports.
    table int_sampling {
        key = { }
        actions = {
            set_int_sampling;
            NoAction;
        }
        default_action = NoAction();
        size = 1;
    }

    apply {
        if (md.lb_mode != LB_MODE_ECMP && md.lb_mode != LB_MODE_SPRAY) {
            flow_path.apply();
        }
        if (!md.has_path) {
            dst_leaf.apply();
            if (md.dst_leaf_hit) {
                if (md.lb_mode == LB_MODE_SPRAY) {
                    // Per packet: consecutive PSNs take consecutive buckets, which the
                    // controller's layout (weighted round robin) spreads over the paths.
                    md.path_bucket = (bit<8>)(hdr.bth.psn & (PATH_BUCKETS - 1));
                    md.path_kind = PATH_KIND_SPRAY;
                } else {
                    load_balance.apply(hdr, md);
                }
                path_candidate.apply();
            }
        }
        if (md.has_path) {
            md.push_shim = true;
            int_policy.apply();
            if (md.int_enabled == 1) {
                int_sampling.apply();
                int_sampler.apply(hdr, md);
            }
        }
    }
}

#endif  // ICE_PATH_SELECT_P4
