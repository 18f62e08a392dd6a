#ifndef ICE_TNA_TAG_SWITCH_P4
#define ICE_TNA_TAG_SWITCH_P4

// Forwarding by path tag, as the v1model TagSwitch: push the shim on the first hop, check and
// decrement the hop limit on transit hops, end_path on the last switch.  TNA direct counters
// count only in actions that call count(), so every action does.
control TagSwitch(inout ice_ingress_headers_t hdr,
                  inout ice_ingress_metadata_t md,
                  inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    DirectCounter<bit<64>>(CounterType_t.PACKETS_AND_BYTES) tag_forward_counter;

    action forward_by_tag(PortId_t port) {
        ig_tm_md.ucast_egress_port = port;
        tag_forward_counter.count();
    }

    action end_path() {
        md.end_path = true;
        tag_forward_counter.count();
    }

    action drop_unknown_tag() {
        md.drop_reason = DROP_REASON_UNKNOWN_TAG;
        tag_forward_counter.count();
    }

    // Every path through this switch: the next port, or end_path on the path's last switch.
    table tag_forward {
        key = {
            md.path_tag : exact @name("path_tag");
        }
        actions = {
            forward_by_tag;
            end_path;
            @defaultonly drop_unknown_tag;
        }
        const default_action = drop_unknown_tag();
        counters = tag_forward_counter;
        size = TAG_FORWARD_TABLE_SIZE;
    }

    action push_shim() {
        hdr.ice_shim.setValid();
        hdr.ice_shim.version = ICE_VERSION;
        hdr.ice_shim.path_kind = md.path_kind;
        hdr.ice_shim.int_enabled = md.int_enabled;
        hdr.ice_shim._reserved0 = 0;
        hdr.ice_shim.hop_limit = md.initial_hop_limit;
        hdr.ice_shim.int_hop_count = 0;
        hdr.ice_shim._reserved1 = 0;
        hdr.ice_shim.path_tag = md.path_tag;
        hdr.ice_shim.orig_ether_type = hdr.ethernet.ether_type;
        hdr.ethernet.ether_type = ETHERTYPE_ICE;
    }

    action decrement_hop_limit() {
        hdr.ice_shim.hop_limit = hdr.ice_shim.hop_limit - 1;
    }

    apply {
        tag_forward.apply();
        if (md.drop_reason == DROP_REASON_NONE && !md.end_path) {
            if (md.push_shim) {
                push_shim();
            } else if (hdr.ice_shim.hop_limit <= 1) {
                md.drop_reason = DROP_REASON_HOP_LIMIT;
            } else {
                decrement_hop_limit();
            }
        }
        if (md.end_path && hdr.ice_shim.isValid()) {
            md.strip_shim = true;
        }
    }
}

#endif  // ICE_TNA_TAG_SWITCH_P4
