#ifndef ICE_ARP_P4
#define ICE_ARP_P4

// Answers ARP requests for addresses the controller knows (gateway addresses of the switch and,
// as a proxy, the fabric's hosts); everything else goes to the controller as a packet-in.
// Shared by both architectures: each passes its own ingress port and egress port fields.
control ArpResponder(inout ice_ingress_headers_t hdr,
                     in port_id_t ingress_port,
                     inout port_id_t egress_port) {

    action reply_arp(mac_addr_t mac) {
        ipv4_addr_t requested_ip = hdr.arp.target_ip;
        hdr.ethernet.dst_addr = hdr.ethernet.src_addr;
        hdr.ethernet.src_addr = mac;
        hdr.arp.oper = ARP_OPER_REPLY;
        hdr.arp.target_mac = hdr.arp.sender_mac;
        hdr.arp.target_ip = hdr.arp.sender_ip;
        hdr.arp.sender_mac = mac;
        hdr.arp.sender_ip = requested_ip;
        egress_port = ingress_port;
    }

    action punt_arp() {
        egress_port = CPU_PORT;
        fill_packet_in(hdr.packet_in, ingress_port, 0, PUNT_REASON_ARP);
    }

    // Written by the controller: IPv4 address -> the MAC that owns it.
    table arp_reply {
        key = {
            hdr.arp.target_ip : exact @name("target_ip");
        }
        actions = {
            reply_arp;
            punt_arp;
        }
        default_action = punt_arp();
        size = ARP_REPLY_TABLE_SIZE;
    }

    apply {
        // Two comparisons of at most 4 bytes each (a Tofino gateway reads 4 bytes + 12 bits).
        if (hdr.arp.oper != ARP_OPER_REQUEST) {
            punt_arp();
        } else if (hdr.arp.htype == ARP_HTYPE_ETHERNET && hdr.arp.ptype == ETHERTYPE_IPV4) {
            arp_reply.apply();
        } else {
            punt_arp();
        }
    }
}

#endif  // ICE_ARP_P4
