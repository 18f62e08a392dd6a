#ifndef ICE_TNA_METADATA_P4
#define ICE_TNA_METADATA_P4

// Headers and metadata of the TNA program, and what the shared controls (p4src/common/control/)
// need from an architecture: CPU_PORT, the ingress structs ice_ingress_headers_t /
// ice_ingress_metadata_t, ICE_DIRECT_COUNTER / ICE_DIRECT_COUNT.  The wire formats (Ethernet ...
// BTH, the ICE shim, INT hop records, feedback, report, packet_in/packet_out) are
// p4src/common/headers.p4, shared with the v1model program; what is here exists because TNA runs ingress and egress as two
// programs with nothing in common but the packet: every value egress needs from ingress travels
// in front of the packet, as a bridged header (data packets) or a mirror header (last-hop copies).

// The CPU (PCIe) port: -DICE_TNA_CPU_PORT=N (tna/ice.p4).
const port_id_t CPU_PORT = ICE_TNA_CPU_PORT;

// A table's direct packets-and-bytes counter: TNA counts only in the actions that call count().
#define ICE_DIRECT_COUNTER(name) DirectCounter<bit<64>>(CounterType_t.PACKETS_AND_BYTES) name
#define ICE_DIRECT_COUNT(name) name.count()

// First byte of everything ingress hands to egress: which of the two headers follows.
const bit<8> ICE_MD_BRIDGED = 1;
const bit<8> ICE_MD_MIRROR  = 2;

// Ingress mirror type of the last-hop copy (ig_dprsr_md.mirror_type; 0 means "no mirror").
const MirrorType_t ICE_MIRROR_TYPE_LAST_HOP = 1;

// Ingress -> egress, on every packet.  Kept small: the parsers and deparsers of both gresses
// pay for every bridged byte on every packet.  16 bytes.
header ice_bridged_md_t {
    bit<8>      md_kind;            // ICE_MD_BRIDGED
    bit<1>      strip_shim;         // last hop: egress removes shim and INT records
    bit<1>      to_cpu;             // a packet_in header follows (punts)
    @padding bit<6> _pad0;
    @padding bit<7> _pad1;
    PortId_t    ingress_port;       // INT records name the ingress port
    switch_id_t switch_id;          // SwitchConfig's id, for this hop's INT record
    bit<32>     flow_slot;          // per-flow register index
    bit<32>     now_us;             // ingress time, microseconds (see IceTnaIngress)
}

// Ingress -> egress, on the last-hop copy only (prepended by the mirror engine).
header ice_mirror_md_t {
    bit<8>      md_kind;            // ICE_MD_MIRROR
    @padding bit<7> _pad0;
    PortId_t    host_port;          // the port the data packet leaves on towards its host
    @padding bit<7> _pad1;
    PortId_t    orig_ingress_port;  // the port the data packet arrived on
    switch_id_t switch_id;
    bit<32>     flow_slot;
    bit<32>     last_hop_ts_us;     // ingress time of the data packet, microseconds
}

// One 32-bit word of IPv4 options: Tofino parsers extract fixed-size headers, so the options
// are a stack of words counted by a ParserCounter instead of v1model's varbit.
header ipv4_option_word_t {
    bit<32> data;
}
#define IPV4_OPTION_WORDS 10

// Ingress headers, in ingress deparse order.
struct ice_ingress_headers_t {
    ice_bridged_md_t        bridged;
    packet_out_t            packet_out;
    packet_in_t             packet_in;
    ethernet_t              ethernet;
    arp_t                   arp;
    ice_shim_t              ice_shim;
    int_hop_t[INT_MAX_HOPS] int_hops;
    ipv4_t                  ipv4;
    ipv4_option_word_t[IPV4_OPTION_WORDS] ipv4_options;
    udp_t                   udp;
    bth_t                   bth;
}

struct ice_ingress_metadata_t {
    bool          checksum_error;
    drop_reason_t drop_reason;
    // SwitchConfig.
    switch_id_t   switch_id;
    bit<8>        switch_role;
    bit<8>        ingress_port_kind;
    bit<8>        initial_hop_limit;
    bit<8>        lb_mode;
    bit<1>        use_qp_in_hash;
    bit<32>       flowlet_timeout_us;
    bit<16>       feedback_every_n;
    bit<32>       feedback_every_n_minus_1;
    bit<1>        report_enabled;
    QueueId_t     control_qid;
    QueueId_t     feedback_qid;
    // Flow and time.
    bit<32>       flow_slot;
    bit<32>       now_us;
    bit<32>       flowlet_cutoff_us;
    // Path selection.
    bool          has_path;
    bool          push_shim;
    bool          end_path;
    bit<1>        int_enabled;
    path_tag_t    path_tag;
    bit<2>        path_kind;
    bool          dst_leaf_hit;
    leaf_id_t     dst_leaf;
    bit<8>        path_bucket;
    bit<24>       int_sample_mask;
    bool          routed;
    bool          strip_shim;
    // Last-hop mirror.
    MirrorId_t    mirror_session;
    ice_mirror_md_t mirror_md;
}

// Egress headers, in egress deparse order.  One order serves the three kinds of packet that
// leave: data (ethernet / shim / this hop's record / earlier records / IPv4 ...), feedback
// (ethernet / fb_ipv4 / fb_udp / ice_feedback / last hop's record / earlier records) and
// reports (packet_in / telemetry_report / records).  v1model pushes this hop's record on the
// front of the stack; here it is a header of its own emitted in front of the parsed records, so
// no record is ever copied (Tofino: no variable-length copies), and the feedback builds its own
// IPv4/UDP headers in front of the records instead of moving the records behind the packet's.
struct ice_egress_headers_t {
    ice_bridged_md_t        bridged;
    ice_mirror_md_t         mirror_md;
    packet_in_t             packet_in;
    telemetry_report_t      telemetry_report;
    ethernet_t              ethernet;
    arp_t                   arp;
    ipv4_t                  fb_ipv4;
    udp_t                   fb_udp;
    ice_feedback_t          ice_feedback;
    ice_shim_t              ice_shim;
    int_hop_t               new_hop;
    int_hop_t[INT_MAX_HOPS] int_hops;
    ipv4_t                  ipv4;
    ipv4_option_word_t[IPV4_OPTION_WORDS] ipv4_options;
    udp_t                   udp;
    bth_t                   bth;
}

struct ice_egress_metadata_t {
    bool          is_copy;
    PortId_t      stats_port;
    bit<16>       record_ingress_port;
    bit<32>       tx_bytes_lo;
    bit<32>       tx_bytes_hi;
    bit<32>       enq_qdepth;
    bit<32>       deq_qdepth;
    bit<32>       link_rate_mbps;
    bit<32>       now_us;
    bit<8>        fb_hop_count;
    bit<32>       ecn_kmin;
    bit<32>       ecn_kmax;
    bit<32>       ecn_pmax_mask;
    bool          ecn_enabled;
    mac_addr_t    feedback_src_mac;
    mac_addr_t    feedback_dst_mac;
    bit<32>       report_every_n;
    bit<32>       report_every_n_minus_1;
    bit<32>       report_qdepth_threshold;
    bit<4>        report_reason;
    bit<32>       pkt_len;
}

#endif  // ICE_TNA_METADATA_P4
