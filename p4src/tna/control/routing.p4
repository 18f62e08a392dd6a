#ifndef ICE_TNA_ROUTING_P4
#define ICE_TNA_ROUTING_P4

// The v1model Ipv4Routing (common/control/routing.p4 holds it) laid out for Tofino's stages:
// the same table, actions, parameters and P4Runtime names, the same forwarding, but in two
// steps.  RouteLookup looks the destination up for every IPv4 packet at the start of the
// ingress and keeps the entry's action and parameters in metadata (md.route_*); Ipv4Routing,
// applied where v1model applies the table (packets without a path tag and the last hop of
// tagged ones), acts on them.  The lookup no longer waits for the path decision (tag_forward
// says whether a tagged packet is at its last hop), and the TTL check and the last hop's
// counter no longer wait for it either: that is the difference between 12 stages and 14 on
// Tofino 1.  P4 has no second apply block, so the lookup is a control of its own whose table
// and actions take the v1model names (IceIngress.routing.*) by @name.

const bit<2> ROUTE_NONE    = 0;    // no entry: drop_no_route
const bit<2> ROUTE_TO_PORT = 1;
const bit<2> ROUTE_PUNT    = 2;
const bit<2> ROUTE_DROP    = 3;

control RouteLookup(in ice_ingress_headers_t hdr,
                    inout ice_ingress_metadata_t md) {

    @name(".IceIngress.routing.route_to_port")
    action route_to_port(port_id_t port, mac_addr_t src_mac, mac_addr_t dst_mac) {
        md.route_kind = ROUTE_TO_PORT;
        md.route_port = port;
        md.route_src_mac = src_mac;
        md.route_dst_mac = dst_mac;
    }

    @name(".IceIngress.routing.punt_to_cpu")
    action punt_to_cpu() {
        md.route_kind = ROUTE_PUNT;
    }

    @name(".IceIngress.routing.drop_route")
    action drop_route() {
        md.route_kind = ROUTE_DROP;
    }

    @name(".IceIngress.routing.drop_no_route")
    action drop_no_route() {
        md.route_kind = ROUTE_NONE;
    }

    // Written by the controller: host /32 routes on their leaf (port, gateway MAC, host MAC),
    // and prefixes towards the spines elsewhere.
    @name(".IceIngress.routing.ipv4_route")
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

    apply {
        ipv4_route.apply();
    }
}

control Ipv4Routing(inout ice_ingress_headers_t hdr,
                    inout ice_ingress_metadata_t md,
                    in port_id_t ingress_port,
                    inout port_id_t egress_port) {

    action forward_routed() {
        egress_port = md.route_port;
        hdr.ethernet.src_addr = md.route_src_mac;
        hdr.ethernet.dst_addr = md.route_dst_mac;
    }

    action punt_routed() {
        egress_port = CPU_PORT;
        fill_packet_in(hdr.packet_in, ingress_port, 0, PUNT_REASON_ROUTE);
    }

    action decrement_ttl() {
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    apply {
        if (md.route_kind == ROUTE_TO_PORT) {
            forward_routed();
            if (!md.end_path) {
                if (hdr.ipv4.ttl <= 1) {
                    md.drop_reason = DROP_REASON_TTL_EXPIRED;
                } else {
                    decrement_ttl();
                }
            }
        } else if (md.route_kind == ROUTE_PUNT) {
            punt_routed();
        } else if (md.route_kind == ROUTE_DROP) {
            md.drop_reason = DROP_REASON_ROUTE_DROP;
        } else {
            md.drop_reason = DROP_REASON_NO_ROUTE;
        }
    }
}

#endif  // ICE_TNA_ROUTING_P4
