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

// Ingress -> egress, on every packet.  Kept small: on Tofino 1 the egress parser may look at
// most 160 bytes into what it receives, and that budget also pays for the 27-byte egress
// intrinsic metadata, this header, Ethernet, the shim, the INT records egress parses and IPv4
// (see IceTnaEgressParser).  7 bytes.
header ice_bridged_md_t {
    bit<8>      md_kind;            // ICE_MD_BRIDGED
    bit<1>      to_cpu;             // a packet_in header follows (punts)
    @padding bit<6> _pad0;
    PortId_t    ingress_port;       // INT records name the ingress port
    switch_id_t switch_id;          // SwitchConfig's id, for this hop's INT record
}

// Ingress -> egress, on the last-hop copy only (prepended by the mirror engine to a copy of
// the packet as it arrived: shim, INT records, IPv4 ...).  The copy's egress parser stops after
// the shim (the records and what follows them stay payload, Tofino 1's parse depth allows no
// more), so what feedback and reports need from the flow's headers travels here.  Tofino 1's
// deparser puts at most 32 bytes of mirror header in front of a copy (bf-asm: "mirror digest
// limited to 32 bytes", counted in whole PHV containers; 48 on Tofino 2), so this is 32, laid
// out in whole containers: the records' largest queue depth fills a 32-bit word with md_kind
// (bf-p4c computes it with max() into a 32-bit field and will not split a 24-bit copy of it),
// and each 9-bit port sits in the low bits of 16 as in the intrinsic metadata it is copied from
// (a Tofino action cannot shift a field and write a constant beside it in one container).  The
// report sampler's per-flow index is hashed again in egress from the flow's fields, and feedback
// and reports carry the last hop's egress time of the copy rather than its ingress time.
header ice_mirror_md_t {
    bit<8>      md_kind;            // ICE_MD_MIRROR
    bit<32>     records_max_qdepth; // largest enq_qdepth of the records the packet carried
    @padding bit<7> _pad0;
    PortId_t    host_port;          // the port the data packet leaves on towards its host
    @padding bit<7> _pad1;
    PortId_t    orig_ingress_port;  // the port the data packet arrived on
    switch_id_t switch_id;
    bit<32>     flow_src_addr;
    bit<32>     flow_dst_addr;
    bit<16>     flow_src_port;
    bit<16>     flow_dst_port;
    bit<8>      bth_opcode;
    bit<24>     flow_dst_qp;
    bit<24>     bth_psn;
}

// One 32-bit word of IPv4 options: Tofino parsers extract fixed-size headers, so the options
// are a stack of words counted by a ParserCounter instead of v1model's varbit.
header ipv4_option_word_t {
    bit<32> data;
}
#define IPV4_OPTION_WORDS 10

// How many INT records the ingress parser accepts (and the last hop strips), and so how many a
// packet may carry: each hop pushes its own only while fewer than ICE_TNA_INT_MAX_HOPS - 1 are
// there (IntTelemetry), as v1model does with INT_MAX_HOPS (5: a three-tier Clos).  Tofino 1
// takes 3, a leaf-spine fabric's (two records reach the last leaf): its PHV has no room for five
// records of 36 bytes beside the rest of the program.  A packet arriving with more is dropped as a
// parser error; on a longer path the records stop growing after the second hop.
#if __TARGET_TOFINO__ == 2
#define ICE_TNA_INT_MAX_HOPS INT_MAX_HOPS
#else
#define ICE_TNA_INT_MAX_HOPS 3
#endif

// Ingress headers, in ingress deparse order.
struct ice_ingress_headers_t {
    ice_bridged_md_t        bridged;
    packet_out_t            packet_out;
    packet_in_t             packet_in;
    ethernet_t              ethernet;
    arp_t                   arp;
    ice_shim_t              ice_shim;
    int_hop_t[ICE_TNA_INT_MAX_HOPS] int_hops;
    ipv4_t                  ipv4;
    ipv4_option_word_t[IPV4_OPTION_WORDS] ipv4_options;
    udp_t                   udp;
    bth_t                   bth;
}

// path_kind and int_enabled laid out as in the shim's first byte, so that TagSwitch's
// set_shim_flags copies them from one container without shifting.
@pa_byte_pack("ingress", 4, "md.path_kind", "md.int_enabled", 1)
struct ice_ingress_metadata_t {
    // Written by the parser's checksum unit only (parse_ipv4_done), read only for IPv4 packets:
    // Tofino allows a verify() result one write per packet.
    bool          checksum_error;
    // ig_intr_md.ingress_port copied (the first action): PHV allocation places the copy where
    // packet_in.ingress_port sits (the high 9 of 16 bits), which the intrinsic field is not.
    PortId_t      ingress_port;
    PortId_t      no_port;          // 0 (IceIngress.mark_punt)
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
    bit<12>       flow_slot;            // FLOW_STATE_SLOTS cells
    bit<32>       now_ticks;            // 1.024 us ticks (IceIngress.take_time)
    bit<32>       flowlet_cutoff;       // now_ticks - flowlet_timeout_us
    // IPv4 length checks: header bytes, bytes left after the header, and the two verdicts.
    bit<16>       ipv4_hdr_bytes;       // ihl * 4, set by the parser (parse_ipv4_ihl_*)
    bit<16>       ipv4_payload_bytes;
    bit<16>       ipv4_short;           // hdr bytes |-| total_len: non-zero when too short
    bit<16>       udp_excess;           // udp.length |-| payload bytes: non-zero when too long
    // Last hop: enq_qdepth of the records the packet carried (0 for absent ones), reduced to
    // their maximum for the report's queue alarm (ice_mirror_md_t.records_max_qdepth).
    bit<32>       rec_qdepth0;
    bit<32>       rec_qdepth1;
    bit<32>       rec_qdepth2;
    bit<32>       rec_qdepth3;
    // Path selection.
    bool          has_path;
    bool          push_shim;
    bool          end_path;
    bit<1>        int_enabled;
    path_tag_t    path_tag;
    bit<2>        path_kind;
    path_tag_t    planned_tag;          // PathLookups: flow_path's entry
    bool          planned_hit;
    bool          dst_leaf_hit;
    leaf_id_t     dst_leaf;
    bit<8>        path_bucket;
    bit<8>        flowlet_new_bucket;   // the bucket a new flowlet takes (IceIngress)
    bit<24>       int_sample_mask;
    bit<24>       int_sample_psn;       // (psn ^ (psn >> 6)) & int_sample_mask
    bit<32>       int_sample_gap_us;
    bit<32>       int_sample_cutoff;    // now_ticks - gap: a slot sampled at or before it is due
    bit<2>        route_kind;           // RouteLookup: ipv4_route's entry (ROUTE_*)
    port_id_t     route_port;
    mac_addr_t    route_src_mac;
    mac_addr_t    route_dst_mac;
    bool          strip_shim;           // TagSwitch's; IceIngress tests end_path and the shim itself
    // Last-hop mirror.
    MirrorId_t    mirror_session;
    ice_mirror_md_t mirror_md;
}

// How many INT records the egress parser reads to reach IPv4 (ECN marking rewrites it).  Tofino
// 1's egress parser sees at most 160 bytes: 27 of intrinsic metadata + 7 bridged + 14 Ethernet +
// 8 shim + 36 per record + 20 IPv4 leaves room for 2 records.  A packet carrying more is still
// forwarded and gets its INT record (that needs only the shim), but egress cannot reach its
// IPv4 header, so it is not ECN-marked (p4src/README.md, Tofino).  Tofino 2 has no such limit.
#if __TARGET_TOFINO__ == 2
#define ICE_TNA_EGRESS_RECORDS 4
#else
#define ICE_TNA_EGRESS_RECORDS 2
#endif

// Egress headers, in egress deparse order; what the parser leaves unparsed follows them as
// payload.  One order serves the three kinds of packet that leave: data (ethernet / shim / this
// hop's record / earlier records / IPv4 / rest), feedback (ethernet / fb_ipv4 / fb_udp /
// ice_feedback / last hop's record / the copy's records, unparsed) and reports (packet_in /
// telemetry_report / last hop's record / records).  v1model pushes this hop's record on the
// front of the stack; here it is a header of its own emitted in front of the records, so no
// record is ever copied or even parsed for it (Tofino: no variable-length copies, and a
// shallow egress parser), and the feedback builds its own IPv4/UDP headers in front of the
// records instead of moving the records behind the packet's.
struct ice_egress_headers_t {
    ice_bridged_md_t        bridged;
    ice_mirror_md_t         mirror_md;
    packet_in_t             packet_in;
    telemetry_report_t      telemetry_report;
    ethernet_t              ethernet;
    ipv4_t                  fb_ipv4;
    udp_t                   fb_udp;
    ice_feedback_t          ice_feedback;
    ice_shim_t              ice_shim;
    int_hop_t               new_hop;
    int_hop_t[ICE_TNA_EGRESS_RECORDS] int_hops;
    ipv4_t                  ipv4;
}

// The egress clock: a nanosecond timestamp turned into microseconds without a divider
// (IntTelemetry.take_time_*): ns >> 10 and three shifted copies of it (each from a hash unit),
// summed in two steps.  Tofino runs one operation per field per stage, so each step is an action
// of its own.
struct ice_time_parts_t {
    bit<32> t0;     // ns >> 10
    bit<32> t6;     // ns >> 16  (t0 >> 6)
    bit<32> t7;     // ns >> 17  (t0 >> 7)
    bit<32> t11;    // ns >> 21  (t0 >> 11)
}

struct ice_egress_metadata_t {
    bool          is_copy;
    PortId_t      stats_port;
    bit<16>       record_ingress_port;
    PortId_t      report_ingress_port;  // copies of the mirror header's ports for packet_in
    PortId_t      report_host_port;
    bit<32>       tx_bytes_lo;
    bit<32>       tx_bytes_hi;
    bit<32>       tx_bytes_wrap;    // pkt_len |-| tx_bytes_lo: non-zero when the low word wrapped
    bit<32>       enq_qdepth;
    bit<32>       deq_qdepth;
    bit<32>       link_rate_mbps;
    bit<32>       now_us;
    ice_time_parts_t time;
    bit<8>        fb_hop_count;
    // Feedback lengths: UDP and IPv4 totals (FeedbackBuilder.feedback_lengths).
    bit<16>       fb_udp_len;
    bit<16>       fb_ipv4_len;
    bit<32>       ecn_kmin;
    bit<32>       ecn_kmax;
    bit<32>       ecn_pmax_mask;
    bool          ecn_enabled;
    bit<32>       ecn_range;        // kmax - kmin
    bit<32>       ecn_over;         // enq_qdepth |-| kmin
    bit<32>       ecn_below_kmax;   // kmax |-| enq_qdepth: 0 at or above Kmax
    bit<32>       ecn_hit;          // ecn_over |-| the ramp draw: non-zero marks (before Pmax)
    bit<32>       ecn_draw;
    bit<32>       ecn_thin;         // (draw >> 16) & pmax_mask
    mac_addr_t    feedback_src_mac;
    mac_addr_t    feedback_dst_mac;
    bit<32>       report_every_n;
    bit<32>       report_every_n_minus_1;
    bit<32>       report_qdepth_threshold;
    bit<32>       report_qdepth;        // max(this hop's enq_qdepth, the records' largest)
    bit<32>       report_qdepth_over;   // report_qdepth |-| threshold
    bit<12>       report_slot;      // the flow's sampling counter (hash of the flow's fields)
    bit<4>        report_reason;
    bit<32>       pkt_len;
}

#endif  // ICE_TNA_METADATA_P4
