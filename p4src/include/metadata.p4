#ifndef ICE_METADATA_P4
#define ICE_METADATA_P4

// The v1model program's header and metadata structs.  The wire formats they hold are in
// headers.p4, shared with the Tofino (TNA) program, which has structs of its own
// (tna/include/metadata.p4): TNA splits ingress and egress and bridges metadata explicitly.

// Field order is deparse order (IceDeparser emits them in this order; only valid ones appear).
struct headers_t {
    packet_out_t           packet_out;
    packet_in_t            packet_in;
    telemetry_report_t     telemetry_report;
    ethernet_t             ethernet;
    arp_t                  arp;
    ice_shim_t             ice_shim;
    int_hop_t[INT_MAX_HOPS] int_hops;
    ipv4_t                 ipv4;
    ipv4_options_t         ipv4_options;
    udp_t                  udp;
    bth_t                  bth;
    ice_feedback_t         ice_feedback;
    int_hop_t[INT_MAX_HOPS] fb_hops;   // records in a feedback packet or report
}

// User metadata.  Flat on purpose: the fields marked @field_list(FL_LAST_HOP) travel with the
// last-hop clone, and p4c wants them as direct members of the metadata struct.
struct local_metadata_t {
    // Parser.
    bit<8>        int_hops_left;

    // Egress queue priorities (IceIngress.queue_config; 0 until the controller sets them).
    bit<3>        control_priority;
    bit<3>        feedback_priority;

    // Switch and port configuration (IceIngress.config).
    @field_list(FL_LAST_HOP)
    switch_id_t   switch_id;
    bit<8>        switch_role;
    bit<8>        ingress_port_kind;
    bit<8>        initial_hop_limit;
    bit<8>        lb_mode;
    bit<1>        use_qp_in_hash;
    bit<32>       flowlet_timeout_us;
    bit<16>       feedback_every_n;
    bit<1>        report_enabled;

    // Flow identity.
    @field_list(FL_LAST_HOP)
    bit<32>       flow_slot;          // index into per-flow register arrays

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
    bool          routed;
    bool          strip_shim;         // last hop: the egress removes shim and INT
    drop_reason_t drop_reason;

    // Last-hop clone (feedback / report).
    @field_list(FL_LAST_HOP)
    bit<1>        last_hop_copy;
    @field_list(FL_LAST_HOP)
    port_id_t     host_port;
    @field_list(FL_LAST_HOP)
    port_id_t     orig_ingress_port;
    @field_list(FL_LAST_HOP)
    bit<48>       last_hop_ts;

    // Egress.
    bool          is_copy;
    port_id_t     stats_port;
    bit<32>       link_rate_mbps;
    bit<8>        fb_hop_count;
    bit<32>       ecn_kmin;
    bit<32>       ecn_kmax;
    bit<32>       ecn_pmax_mask;
    bool          ecn_enabled;
    mac_addr_t    feedback_src_mac;
    mac_addr_t    feedback_dst_mac;
    bit<32>       report_every_n;
    bit<32>       report_qdepth_threshold;
}

#endif  // ICE_METADATA_P4
