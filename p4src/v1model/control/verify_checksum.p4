#ifndef ICE_VERIFY_CHECKSUM_P4
#define ICE_VERIFY_CHECKSUM_P4

// Two calls instead of one: with options the varbit must be part of the sum, without them an
// unextracted varbit must not be (targets differ on invalid-header fields in a field list).
control IceVerifyChecksum(inout headers_t hdr, inout local_metadata_t md) {
    apply {
        verify_checksum(hdr.ipv4.isValid() && !hdr.ipv4_options.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
        verify_checksum(hdr.ipv4.isValid() && hdr.ipv4_options.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4_options.options },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

#endif  // ICE_VERIFY_CHECKSUM_P4
