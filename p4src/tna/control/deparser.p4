#ifndef ICE_TNA_DEPARSER_P4
#define ICE_TNA_DEPARSER_P4

// Ingress deparser: the last-hop mirror (with its header) and the packet with its bridged
// header in front.  The IPv4 checksum is recomputed here after ingress's changes (TTL), over
// the option words too (the ingress parser read them; the egress parser does not); the egress
// deparser recomputes it again when egress rewrote the header (ECN), which it does only for
// headers without options.  Invalid option words add nothing to the sum.
control IceIngressDeparser(packet_out pkt,
                           inout ice_ingress_headers_t hdr,
                           in ice_ingress_metadata_t md,
                           in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {

    // Mirror() with the type tested here and the header as a field list, as bf-p4c's own
    // workaround (DropPacketWithMirrorEngine) writes the mirror it adds to every TNA ingress
    // deparser: next to that one, a Mirror(ICE_MIRROR_TYPE_LAST_HOP) is refused ("Inconsistent
    // mirror selectors").  The list is ice_mirror_md_t's fields in order.
    Mirror() last_hop_mirror;
    Checksum() ipv4_checksum;

    apply {
        if (ig_dprsr_md.mirror_type == ICE_MIRROR_TYPE_LAST_HOP) {
            last_hop_mirror.emit<ice_mirror_md_t>(md.mirror_session, {
                md.mirror_md.md_kind, md.mirror_md.records_max_qdepth,
                md.mirror_md._pad0, md.mirror_md.host_port,
                md.mirror_md._pad1, md.mirror_md.orig_ingress_port,
                md.mirror_md.switch_id, md.mirror_md.flow_src_addr, md.mirror_md.flow_dst_addr,
                md.mirror_md.flow_src_port, md.mirror_md.flow_dst_port,
                md.mirror_md.bth_opcode, md.mirror_md.flow_dst_qp, md.mirror_md.bth_psn });
        }
        if (hdr.ipv4.isValid()) {
            hdr.ipv4.hdr_checksum = ipv4_checksum.update({
                hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
                hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
                hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
                hdr.ipv4.src_addr, hdr.ipv4.dst_addr,
                hdr.ipv4_options[0].data, hdr.ipv4_options[1].data, hdr.ipv4_options[2].data,
                hdr.ipv4_options[3].data, hdr.ipv4_options[4].data, hdr.ipv4_options[5].data,
                hdr.ipv4_options[6].data, hdr.ipv4_options[7].data, hdr.ipv4_options[8].data,
                hdr.ipv4_options[9].data });
        }
        pkt.emit(hdr);
    }
}

// Egress deparser: headers in ice_egress_headers_t order (only valid ones appear; what the
// parser did not read follows as payload), IPv4 checksums computed by the deparser's checksum
// unit: the packet's own header (parsed only without options) and the feedback's.
control IceEgressDeparser(packet_out pkt,
                          inout ice_egress_headers_t hdr,
                          in ice_egress_metadata_t md,
                          in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {

    Checksum() ipv4_checksum;
    Checksum() feedback_checksum;

    apply {
        if (hdr.ipv4.isValid()) {
            hdr.ipv4.hdr_checksum = ipv4_checksum.update({
                hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
                hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
                hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
                hdr.ipv4.src_addr, hdr.ipv4.dst_addr });
        }
        if (hdr.fb_ipv4.isValid()) {
            hdr.fb_ipv4.hdr_checksum = feedback_checksum.update({
                hdr.fb_ipv4.version, hdr.fb_ipv4.ihl, hdr.fb_ipv4.dscp, hdr.fb_ipv4.ecn,
                hdr.fb_ipv4.total_len, hdr.fb_ipv4.identification, hdr.fb_ipv4.flags,
                hdr.fb_ipv4.frag_offset, hdr.fb_ipv4.ttl, hdr.fb_ipv4.protocol,
                hdr.fb_ipv4.src_addr, hdr.fb_ipv4.dst_addr });
        }
        pkt.emit(hdr);
    }
}

#endif  // ICE_TNA_DEPARSER_P4
