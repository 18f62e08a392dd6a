#ifndef ICE_TAG_SWITCH_P4
#define ICE_TAG_SWITCH_P4

// Forwarding by path tag.  On the first hop the tag was just chosen (PathSelect) and the shim
// is pushed here; on transit hops the tag comes from the shim and the hop limit is checked; on
// the last hop the tag's entry says end_path and the packet is routed to the host by IPv4, the
// egress stripping shim and INT.  IPv4 TTL is not touched on tagged hops: like an MPLS LSP in
// pipe mode the fabric is one IP hop, and the shim's hop limit guards against loops.
control TagSwitch(inout headers_t hdr,
                  inout local_metadata_t meta,
                  inout standard_metadata_t standard_metadata) {

    direct_counter(CounterType.packets_and_bytes) tag_forward_counter;

    action forward_by_tag(port_id_t port) {
        standard_metadata.egress_spec = port;
    }

    action end_path() {
        meta.end_path = true;
    }

    action drop_unknown_tag() {
        meta.drop_reason = DROP_REASON_UNKNOWN_TAG;
    }

    // Written by the controller for every path through this switch: the next port, or
    // end_path on the path's last switch.  Its direct counter is the per-tag counter.
    table tag_forward {
        key = {
            meta.path_tag : exact @name("path_tag");
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
        hdr.ice_shim.path_kind = meta.path_kind;
        hdr.ice_shim.int_enabled = meta.int_enabled;
        hdr.ice_shim._reserved0 = 0;
        hdr.ice_shim.hop_limit = meta.initial_hop_limit;
        hdr.ice_shim.int_hop_count = 0;
        hdr.ice_shim._reserved1 = 0;
        hdr.ice_shim.path_tag = meta.path_tag;
        hdr.ice_shim.orig_ether_type = hdr.ethernet.ether_type;
        hdr.ethernet.ether_type = ETHERTYPE_ICE;
    }

    action decrement_hop_limit() {
        hdr.ice_shim.hop_limit = hdr.ice_shim.hop_limit - 1;
    }

    apply {
        tag_forward.apply();
        if (meta.drop_reason == DROP_REASON_NONE && !meta.end_path) {
            if (meta.push_shim) {
                push_shim();
            } else if (hdr.ice_shim.hop_limit <= 1) {
                meta.drop_reason = DROP_REASON_HOP_LIMIT;
            } else {
                decrement_hop_limit();
            }
        }
        if (meta.end_path && hdr.ice_shim.isValid()) {
            meta.strip_shim = true;
        }
    }
}

#endif  // ICE_TAG_SWITCH_P4
