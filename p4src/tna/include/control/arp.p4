#ifndef ICE_TNA_ARP_P4
#define ICE_TNA_ARP_P4

// Answers ARP requests for addresses the controller knows; everything else goes to the CPU.
// Same table and actions as the v1model ArpResponder.
control ArpResponder(inout ice_ingress_headers_t hdr,
                     inout ice_ingress_metadata_t md,
                     in ingress_intrinsic_metadata_t ig_intr_md,
                     inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    action reply_arp(mac_addr_t mac) {
        ipv4_addr_t requested_ip = hdr.arp.target_ip;
        hdr.ethernet.dst_addr = hdr.ethernet.src_addr;
        hdr.ethernet.src_addr = mac;
        hdr.arp.oper = ARP_OPER_REPLY;
        hdr.arp.target_mac = hdr.arp.sender_mac;
        hdr.arp.target_ip = hdr.arp.sender_ip;
        hdr.arp.sender_mac = mac;
        hdr.arp.sender_ip = requested_ip;
        ig_tm_md.ucast_egress_port = ig_intr_md.ingress_port;
    }

    action punt_arp() {
        ig_tm_md.ucast_egress_port = ICE_TNA_CPU_PORT;
        hdr.packet_in.setValid();
        hdr.packet_in.ingress_port = ig_intr_md.ingress_port;
        hdr.packet_in._pad0 = 0;
        hdr.packet_in.egress_port = 0;
        hdr.packet_in._pad1 = 0;
        hdr.packet_in.reason = PUNT_REASON_ARP;
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
        if (hdr.arp.oper == ARP_OPER_REQUEST && hdr.arp.htype == ARP_HTYPE_ETHERNET
                && hdr.arp.ptype == ETHERTYPE_IPV4) {
            arp_reply.apply();
        } else {
            punt_arp();
        }
    }
}

#endif  // ICE_TNA_ARP_P4
