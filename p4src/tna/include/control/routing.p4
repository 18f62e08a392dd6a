#ifndef ICE_TNA_ROUTING_P4
#define ICE_TNA_ROUTING_P4

// Plain IPv4 LPM routing, as the v1model Ipv4Routing (same table, actions and parameters).
control Ipv4Routing(inout ice_ingress_headers_t hdr,
                    inout ice_ingress_metadata_t md,
                    in ingress_intrinsic_metadata_t ig_intr_md,
                    inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    action route_to_port(PortId_t port, mac_addr_t src_mac, mac_addr_t dst_mac) {
        ig_tm_md.ucast_egress_port = port;
        hdr.ethernet.src_addr = src_mac;
        hdr.ethernet.dst_addr = dst_mac;
        md.routed = true;
    }

    action punt_to_cpu() {
        ig_tm_md.ucast_egress_port = ICE_TNA_CPU_PORT;
        hdr.packet_in.setValid();
        hdr.packet_in.ingress_port = ig_intr_md.ingress_port;
        hdr.packet_in._pad0 = 0;
        hdr.packet_in.egress_port = 0;
        hdr.packet_in._pad1 = 0;
        hdr.packet_in.reason = PUNT_REASON_ROUTE;
    }

    action drop_route() {
        md.drop_reason = DROP_REASON_ROUTE_DROP;
    }

    action drop_no_route() {
        md.drop_reason = DROP_REASON_NO_ROUTE;
    }

    // Host /32 routes on their leaf, prefixes towards the spines elsewhere.
    table ipv4_route {
        key = {
            hdr.ipv4.dst_addr : lpm @name("dst_addr");
        }
        actions = {
            route_to_port;
            punt_to_cpu;
            drop_route;
            @defaultonly drop_no_route;
        }
        const default_action = drop_no_route();
        size = IPV4_ROUTE_TABLE_SIZE;
    }

    action decrement_ttl() {
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    apply {
        ipv4_route.apply();
        if (md.routed && !md.end_path) {
            if (hdr.ipv4.ttl <= 1) {
                md.drop_reason = DROP_REASON_TTL_EXPIRED;
            } else {
                decrement_ttl();
            }
        }
    }
}

#endif  // ICE_TNA_ROUTING_P4
