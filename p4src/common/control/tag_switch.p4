#ifndef ICE_TAG_SWITCH_P4
#define ICE_TAG_SWITCH_P4

// Forwarding by path tag.  On the first hop the tag was just chosen (PathSelect) and the shim
// is pushed here; on transit hops the tag comes from the shim and the hop limit is checked; on
// the last hop the tag's entry says end_path and the packet is routed to the host by IPv4, the
// egress stripping shim and INT.  IPv4 TTL is not touched on tagged hops: like an MPLS LSP in
// pipe mode the fabric is one IP hop, and the shim's hop limit guards against loops.
//
// Shared by both architectures.  The per-tag counter is a direct counter: ICE_DIRECT_COUNTER and
// ICE_DIRECT_COUNT are the architecture's (v1model counts every hit by itself, TNA only where an
// action calls count()).
control TagSwitch(inout ice_ingress_headers_t hdr,
                  inout ice_ingress_metadata_t md,
                  inout port_id_t egress_port) {

    ICE_DIRECT_COUNTER(tag_forward_counter);

    action forward_by_tag(port_id_t port) {
        egress_port = port;
        ICE_DIRECT_COUNT(tag_forward_counter);
    }

    action end_path() {
        md.end_path = true;
        ICE_DIRECT_COUNT(tag_forward_counter);
    }

    action drop_unknown_tag() {
        md.drop_reason = DROP_REASON_UNKNOWN_TAG;
        ICE_DIRECT_COUNT(tag_forward_counter);
    }

    // Written by the controller for every path through this switch: the next port, or
    // end_path on the path's last switch.  Its direct counter is the per-tag counter.
    table tag_forward {
        key = {
            md.path_tag : exact @name("path_tag");
        }
        actions = {
            forward_by_tag;
            end_path;
            @defaultonly drop_unknown_tag;
        }
        default_action = drop_unknown_tag();
        counters = tag_forward_counter;
        size = TAG_FORWARD_TABLE_SIZE;
    }

    action push_shim() {
        hdr.ice_shim.setValid();
        hdr.ice_shim.version = ICE_VERSION;
        hdr.ice_shim._reserved0 = 0;
        hdr.ice_shim.hop_limit = md.initial_hop_limit;
        hdr.ice_shim.int_hop_count = 0;
        hdr.ice_shim._reserved1 = 0;
        hdr.ice_shim.path_tag = md.path_tag;
        hdr.ice_shim.orig_ether_type = hdr.ethernet.ether_type;
        hdr.ethernet.ether_type = ETHERTYPE_ICE;
    }

    // A second action for the first byte's two fields from metadata: on Tofino an action may
    // write a container from one PHV source plus constants, or from two PHV sources, not both.
    action set_shim_flags() {
        hdr.ice_shim.path_kind = md.path_kind;
        hdr.ice_shim.int_enabled = md.int_enabled;
    }

    action decrement_hop_limit() {
        hdr.ice_shim.hop_limit = hdr.ice_shim.hop_limit - 1;
    }

    apply {
        tag_forward.apply();
        if (md.drop_reason == DROP_REASON_NONE && !md.end_path) {
            if (md.push_shim) {
                push_shim();
                set_shim_flags();
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

#endif  // ICE_TAG_SWITCH_P4
