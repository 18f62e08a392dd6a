#ifndef ICE_ROUTING_P4
#define ICE_ROUTING_P4

// Plain IPv4 longest-prefix-match routing: every packet without a path tag (ICMP, TCP, unplanned
// traffic to a host on the same leaf, feedback packets) and the last hop of tagged packets.
// The router MAC of the incoming frame is not checked: the fabric's switches and hosts are all
// configured by one controller, and the ARP responder answers for the gateway addresses.
// Shared by both architectures: each passes its own ingress port and egress port fields.
control Ipv4Routing(inout ice_ingress_headers_t hdr,
                    inout ice_ingress_metadata_t md,
                    in port_id_t ingress_port,
                    inout port_id_t egress_port) {

    action route_to_port(port_id_t port, mac_addr_t src_mac, mac_addr_t dst_mac) {
        egress_port = port;
        hdr.ethernet.src_addr = src_mac;
        hdr.ethernet.dst_addr = dst_mac;
        md.routed = true;
    }

    action punt_to_cpu() {
        egress_port = CPU_PORT;
        fill_packet_in(hdr.packet_in, ingress_port, 0, PUNT_REASON_ROUTE);
    }

    action drop_route() {
        md.drop_reason = DROP_REASON_ROUTE_DROP;
    }

    action drop_no_route() {
        md.drop_reason = DROP_REASON_NO_ROUTE;
    }

    // Written by the controller: host /32 routes on their leaf (port, gateway MAC, host MAC),
    // and prefixes towards the spines elsewhere.
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
        default_action = drop_no_route();
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

#endif  // ICE_ROUTING_P4
