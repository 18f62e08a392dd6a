#ifndef ICE_PUNT_P4
#define ICE_PUNT_P4

// The packet_in header of every packet the switch sends to the controller (ARP and route punts,
// link probes, telemetry reports), in both architectures: where the packet arrived, the port it
// was leaving on (a report's host port; 0 for punts) and why (PUNT_REASON_*).  The caller also
// sends the packet to CPU_PORT (a punt) or builds it in the egress of a copy (a report).
void fill_packet_in(inout packet_in_t pkt_in, in port_id_t ingress_port,
                    in port_id_t egress_port, in punt_reason_t reason) {
    pkt_in.setValid();
    pkt_in.ingress_port = ingress_port;
    pkt_in._pad0 = 0;
    pkt_in.egress_port = egress_port;
    pkt_in._pad1 = 0;
    pkt_in.reason = reason;
}

#endif  // ICE_PUNT_P4
