#ifndef ICE_METADATA_P4
#define ICE_METADATA_P4

// The v1model program's header and metadata structs, and what the shared controls
// (p4src/common/control/) need from an architecture: CPU_PORT, the ingress struct names
// ice_ingress_headers_t / ice_ingress_metadata_t, ICE_DIRECT_COUNTER / ICE_DIRECT_COUNT.  The
// wire formats are p4src/common/headers.p4, shared with the Tofino (TNA) program, which has
// structs of its own (p4src/tna/metadata.p4): TNA splits ingress and egress and bridges
// metadata explicitly.

// The CPU port of simple_switch_grpc (--cpu-port 255) and of the embedded target.
const port_id_t CPU_PORT = 255;

// Field list preserved on the last-hop I2E clone (the @field_list annotation needs a literal).
#define FL_LAST_HOP 1

// v1model instance_type values as simple_switch sets them.
const bit<32> PKT_INSTANCE_TYPE_NORMAL        = 0;
const bit<32> PKT_INSTANCE_TYPE_INGRESS_CLONE = 1;

// A table's direct packets-and-bytes counter: v1model counts every hit of the table by itself.
#define ICE_DIRECT_COUNTER(name) direct_counter(CounterType.packets_and_bytes) name
#define ICE_DIRECT_COUNT(name)

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

    // Ingress time (ingress_global_timestamp, microseconds), read once by IceIngress.
    bit<48>       now_us;

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
    bit<24>       int_sample_mask;    // IceIngress.path_select.int_sampling: N - 1
    bit<32>       int_sample_gap_us;  // and the most time between two samples of a flow (0: none)
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

// One struct serves v1model's ingress and egress; the shared controls know it by these names.
typedef headers_t        ice_ingress_headers_t;
typedef local_metadata_t ice_ingress_metadata_t;

#endif  // ICE_METADATA_P4
