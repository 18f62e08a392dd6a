#ifndef ICE_DEPARSER_P4
#define ICE_DEPARSER_P4

// Emits in headers_t order; invalid headers emit nothing, so one order serves data packets
// (ethernet/shim/INT/IPv4/...), feedback (ethernet/IPv4/UDP/feedback/records) and reports
// (packet_in/report/records).
control IceDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.telemetry_report);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.arp);
        packet.emit(hdr.ice_shim);
        packet.emit(hdr.int_hops);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.ipv4_options);
        packet.emit(hdr.udp);
        packet.emit(hdr.bth);
        packet.emit(hdr.ice_feedback);
        packet.emit(hdr.fb_hops);
    }
}

#endif  // ICE_DEPARSER_P4
