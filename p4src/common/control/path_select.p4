#ifndef ICE_PATH_SELECT_P4
#define ICE_PATH_SELECT_P4

// First hop of a RoCEv2 packet from a host: choose the path tag.  Order: the controller's
// planned path for this flow, else a candidate path of the destination leaf chosen by
// LoadBalance.  No dst_leaf entry (e.g. the destination hangs off this leaf) means no tag:
// the packet is routed as plain IPv4.
//
// Shared by both architectures; LoadBalance (flowlet registers, hashes) is each one's own
// (v1model/control/load_balance.p4, tna/control/load_balance.p4), with this same signature.
control PathSelect(in ice_ingress_headers_t hdr,
                   inout ice_ingress_metadata_t md) {

    LoadBalance() load_balance;

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

    apply {
        if (md.lb_mode != LB_MODE_ECMP) {
            flow_path.apply();
        }
        if (!md.has_path) {
            dst_leaf.apply();
            if (md.dst_leaf_hit) {
                load_balance.apply(hdr, md);
                path_candidate.apply();
            }
        }
        if (md.has_path) {
            md.push_shim = true;
            int_policy.apply();
        }
    }
}

#endif  // ICE_PATH_SELECT_P4
