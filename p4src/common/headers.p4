#ifndef ICE_HEADERS_P4
#define ICE_HEADERS_P4

// ---------------------------------------------------------------------------------------------
// CPU port headers.  The P4Runtime server turns packet_in into PacketIn metadata and builds
// packet_out from PacketOut metadata; both are whole bytes as @controller_header requires.
// ---------------------------------------------------------------------------------------------
@controller_header("packet_in")
header packet_in_t {
    bit<9>  ingress_port;
    bit<7>  _pad0;
    bit<9>  egress_port;    // for telemetry reports: the host port the flow left on
    bit<7>  _pad1;
    bit<8>  reason;         // PUNT_REASON_*
}

@controller_header("packet_out")
header packet_out_t {
    bit<9>  egress_port;    // the packet leaves on this port, bypassing the pipeline's tables
    bit<7>  _pad0;
}

// ---------------------------------------------------------------------------------------------
// Standard headers.
// ---------------------------------------------------------------------------------------------
header ethernet_t {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

// ARP for IPv4 over Ethernet only (htype 1, ptype 0x0800, hlen 6, plen 4).
header arp_t {
    bit<16>     htype;
    bit<16>     ptype;
    bit<8>      hlen;
    bit<8>      plen;
    bit<16>     oper;
    mac_addr_t  sender_mac;
    ipv4_addr_t sender_ip;
    mac_addr_t  target_mac;
    ipv4_addr_t target_ip;
}

header ipv4_t {
    bit<4>      version;
    bit<4>      ihl;
    bit<6>      dscp;
    bit<2>      ecn;
    bit<16>     total_len;
    bit<16>     identification;
    bit<3>      flags;
    bit<13>     frag_offset;
    bit<8>      ttl;
    bit<8>      protocol;
    bit<16>     hdr_checksum;
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
}

// IPv4 options, (ihl - 5) * 4 bytes, kept so that they are re-emitted and checksummed.
header ipv4_options_t {
    varbit<320> options;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

// InfiniBand Base Transport Header as carried by RoCEv2 (UDP destination port 4791).
header bth_t {
    bit<8>  opcode;
    bit<1>  solicited;
    bit<1>  mig_req;
    bit<2>  pad_count;
    bit<4>  tver;
    bit<16> pkey;
    bit<1>  fecn;
    bit<1>  becn;
    bit<6>  resv6;
    bit<24> dst_qp;
    bit<1>  ack_req;
    bit<7>  resv7;
    bit<24> psn;
}

// ---------------------------------------------------------------------------------------------
// ICE headers.  Byte layouts are in p4src/README.md.
// ---------------------------------------------------------------------------------------------

// The path shim: inserted after Ethernet by the first hop (EtherType ETHERTYPE_ICE), removed by
// the last hop.  INT hop records follow it, newest first, then the original L3 packet.
header ice_shim_t {
    bit<4>     version;          // ICE_VERSION
    bit<2>     path_kind;        // PATH_KIND_*
    bit<1>     int_enabled;      // every hop appends an int_hop_t
    bit<1>     _reserved0;
    bit<8>     hop_limit;        // decremented by every transit hop; 0/1 on arrival: drop
    bit<8>     int_hop_count;    // number of int_hop_t that follow
    bit<8>     _reserved1;
    path_tag_t path_tag;
    bit<16>    orig_ether_type;  // EtherType of the packet inside (IPv4)
}

// One INT hop record (HPCC-style), 36 bytes.
header int_hop_t {
    switch_id_t switch_id;
    bit<16>     ingress_port;
    bit<16>     egress_port;
    bit<32>     enq_qdepth;      // packets in the egress queue when this packet was enqueued
    bit<32>     deq_qdepth;      // packets in the egress queue when it was dequeued
    bit<64>     tx_bytes;        // bytes sent so far on the egress port (wraps)
    bit<64>     egress_ts;       // egress_global_timestamp, microseconds
    bit<32>     link_rate_mbps;  // egress link rate the controller configured
}

// Body of the feedback packet the last hop returns to the sender:
// Ethernet / IPv4 / UDP (dst port UDP_PORT_ICE_FEEDBACK) / ice_feedback_t / int_hop_t * hop_count.
header ice_feedback_t {
    bit<4>      version;
    bit<2>      path_kind;
    bit<2>      _reserved0;
    bit<8>      hop_count;       // int_hop_t records that follow, newest (last hop) first
    path_tag_t  path_tag;
    switch_id_t switch_id;       // the last hop that generated it
    ipv4_addr_t flow_src_addr;   // the data flow's key, as the sender sent it
    ipv4_addr_t flow_dst_addr;
    bit<16>     flow_src_port;
    bit<16>     flow_dst_port;
    bit<8>      _reserved1;
    bit<24>     flow_dst_qp;
    bit<8>      bth_opcode;
    bit<24>     bth_psn;
    bit<64>     timestamp;       // last hop ingress timestamp, microseconds
}

// Body of the telemetry report sent to the controller as a packet-in:
// packet_in_t / telemetry_report_t / int_hop_t * hop_count.  Same layout as ice_feedback_t
// except that the low nibble of the first byte is the reason (REPORT_REASON_* bits).
header telemetry_report_t {
    bit<4>      version;
    bit<4>      reason;
    bit<8>      hop_count;
    path_tag_t  path_tag;
    switch_id_t switch_id;
    ipv4_addr_t flow_src_addr;
    ipv4_addr_t flow_dst_addr;
    bit<16>     flow_src_port;
    bit<16>     flow_dst_port;
    bit<8>      _reserved1;
    bit<24>     flow_dst_qp;
    bit<8>      bth_opcode;
    bit<24>     bth_psn;
    bit<64>     timestamp;
}

#endif  // ICE_HEADERS_P4
