#ifndef ICE_TNA_PATH_SELECT_P4
#define ICE_TNA_PATH_SELECT_P4

// The v1model PathSelect (v1model/control/path_select.p4) laid out for Tofino's stages: the
// same tables, actions, parameters and P4Runtime names, the same choice of path, INT policy
// and sampling, but in two steps so that Tofino 1's 12 stages hold the whole ingress.
//
// * lookups(): the four lookups that need nothing computed, for every IPv4 packet at the very
//   start of the ingress (IceIngress), all in the first stage: the planned path (flow_path),
//   the destination leaf (dst_leaf), the sampling settings (int_sampling), and the ECMP hashes.
//   Their results are only metadata; the decisions below read them where v1model applies the
//   tables.  v1model looks up flow_path only in planned modes and dst_leaf only on a miss: the
//   same outcome, since a miss leaves the metadata untouched and a hit is used only where
//   v1model would have looked.
// * apply(): the decision, as v1model's, applied by IceIngress to RoCEv2 packets from a host at
//   a leaf.  int_policy is keyed by the path kind, which is known before the candidate path
//   (planned / spray / flowlet / ECMP is decided by the lookups and the mode), so it runs beside
//   path_candidate instead of after it; the sampler runs when the policy allows INT and the
//   packet has a planned path or its destination leaf is known (v1model: once the candidate
//   path is found too; they differ only for a leaf whose candidate buckets the controller has
//   not written, where this program stamps the flow's sampler slot for a packet that then goes
//   untagged).
//
// P4 has no second apply block, so lookups() is the control PathLookups, whose tables take the
// v1model names (IceIngress.path_select.*) by @name.
control PathLookups(in ice_ingress_headers_t hdr,
                    inout ice_ingress_metadata_t md) {

    @name(".IceIngress.path_select.set_planned_path")
    action set_planned_path(path_tag_t path_tag) {
        md.planned_tag = path_tag;
        md.planned_hit = true;
    }

    // Written by the controller's planner for every planned flow (one entry per RoCEv2 QP).
    @name(".IceIngress.path_select.flow_path")
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

    @name(".IceIngress.path_select.set_dst_leaf")
    action set_dst_leaf(leaf_id_t leaf_id) {
        md.dst_leaf = leaf_id;
        md.dst_leaf_hit = true;
    }

    // Written by the controller from the topology: host prefix -> the leaf it hangs off.
    @name(".IceIngress.path_select.dst_leaf")
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

    @name(".IceIngress.path_select.set_int_sampling")
    action set_int_sampling(bit<24> psn_mask, bit<32> max_gap_us) {
        md.int_sample_mask = psn_mask;
        md.int_sample_gap_us = max_gap_us;
    }

    // Keyless: INT records on 1 in N packets of a flow (v1model/control/path_select.p4 says
    // how); on Tofino the gap is in the ingress clock's 1.024 us ticks (IceIngress.take_time).
    @name(".IceIngress.path_select.int_sampling")
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
        flow_path.apply();
        dst_leaf.apply();
        int_sampling.apply();
    }
}

control PathSelect(in ice_ingress_headers_t hdr,
                   inout ice_ingress_metadata_t md) {

    LoadBalance() load_balance;
    IntSampler() int_sampler;

    action take_planned_path() {
        md.path_tag = md.planned_tag;
        md.path_kind = PATH_KIND_PLANNED;
        md.has_path = true;
        md.push_shim = true;
    }

    // Per packet: consecutive PSNs take consecutive buckets, which the controller's layout
    // (weighted round robin) spreads over the paths.
    action take_spray_bucket() {
        md.path_bucket = (bit<8>)hdr.bth.psn[PATH_BUCKET_BITS - 1:0];
        md.path_kind = PATH_KIND_SPRAY;
    }

    action set_candidate_path(path_tag_t path_tag) {
        md.path_tag = path_tag;
        md.has_path = true;
        md.push_shim = true;
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
        if (md.planned_hit && md.lb_mode != LB_MODE_ECMP && md.lb_mode != LB_MODE_SPRAY) {
            take_planned_path();
        } else if (md.dst_leaf_hit) {
            if (md.lb_mode == LB_MODE_SPRAY) {
                take_spray_bucket();
            } else {
                load_balance.apply(hdr, md);
            }
            path_candidate.apply();
        }
        // Read from the lookups only (not from has_path, which path_candidate writes), so
        // that the policy and the sampler run beside path_candidate.
        if (md.dst_leaf_hit
                || (md.planned_hit && md.lb_mode != LB_MODE_ECMP && md.lb_mode != LB_MODE_SPRAY)) {
            int_policy.apply();
            if (md.int_enabled == 1) {
                int_sampler.apply(hdr, md);
            }
        }
    }
}

#endif  // ICE_TNA_PATH_SELECT_P4
