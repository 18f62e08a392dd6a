#ifndef ICE_COMPUTE_CHECKSUM_P4
#define ICE_COMPUTE_CHECKSUM_P4

// Recomputed for every IPv4 header that leaves: TTL decrement, ECN marking and the feedback
// rewrite all change it.  Split in two for the same reason as IceVerifyChecksum.
control IceComputeChecksum(inout headers_t hdr, inout local_metadata_t md) {
    apply {
        update_checksum(hdr.ipv4.isValid() && !hdr.ipv4_options.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
        update_checksum(hdr.ipv4.isValid() && hdr.ipv4_options.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4_options.options },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

#endif  // ICE_COMPUTE_CHECKSUM_P4
