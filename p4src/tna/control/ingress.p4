#ifndef ICE_TNA_INGRESS_P4
#define ICE_TNA_INGRESS_P4

// Ingress wiring, the same decisions in the same order as the v1model IceIngress: every drop
// only sets md.drop_reason, the one place at the end drops and counts.  Differences forced by
// TNA: the ingress pipeline does not know the packet's length, so "IPv4 longer than the frame"
// is checked in IceEgress (counted there); queues are chosen by qid instead of priority; the
// drop is drop_ctl; everything egress needs is bridged in front of the packet.
//
// Laid out for Tofino 1's 12 stages, where each step that reads what an earlier one wrote
// waits a stage: everything that needs no decision (the keyless settings and the port kind, the
// lookups of PathLookups and RouteLookup, hashes, the clock, length arithmetic) is done first,
// for every packet, and the decisions below read those results where v1model computes them.
// bf-p4c's placement: p4src/README.md, Tofino.
control IceIngress(inout ice_ingress_headers_t hdr,
                   inout ice_ingress_metadata_t md,
                   in ingress_intrinsic_metadata_t ig_intr_md,
                   in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                   inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                   inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    // Indexed by ingress port: every packet that arrives, good or bad.
    Counter<bit<64>, PortId_t>(PORT_SLOTS, CounterType_t.PACKETS_AND_BYTES) port_rx_counter;
    // Indexed by DROP_REASON_*.
    // Indexed by ingress port: fixed-size RoCEv2 CNPs received (as v1model's).
    Counter<bit<32>, PortId_t>(PORT_SLOTS, CounterType_t.PACKETS) cnp_rx_counter;
    Counter<bit<64>, drop_reason_t>(DROP_REASON_SLOTS, CounterType_t.PACKETS_AND_BYTES)
        drop_reason_counter;

    Hash<bit<12>>(HashAlgorithm_t.CRC32) flow_slot_hash;
    Hash<bit<6>>(HashAlgorithm_t.CRC32) flowlet_hash;

    SwitchConfig() config;
    ArpResponder() arp;
    PathLookups() path_lookups;
    PathSelect() path_select;
    RouteLookup() route_lookup;
    TagSwitch() tag_switch;
    Ipv4Routing() routing;
    LastHop() last_hop;

    action send_packet_out() {
        ig_tm_md.ucast_egress_port = hdr.packet_out.egress_port;
        ig_tm_md.qid = md.control_qid;
        hdr.packet_out.setInvalid();
    }

    action punt_link_probe() {
        ig_tm_md.ucast_egress_port = CPU_PORT;
        ig_tm_md.qid = md.control_qid;
        fill_packet_in(hdr.packet_in, md.ingress_port, 0, PUNT_REASON_LINK_PROBE);
    }

    action set_queue_priorities(bit<3> control_prio, bit<3> feedback_prio) {
        md.control_qid = (QueueId_t)control_prio;
        md.feedback_qid = (QueueId_t)feedback_prio;
    }

    // Keyless; same parameters as v1model's (queue numbers 0..7).  On Tofino they are queue ids
    // (qid) of the egress port, which the switch's queue configuration must map to strict
    // priority for the probes to overtake data.
    table queue_config {
        key = { }
        actions = {
            set_queue_priorities;
            NoAction;
        }
        default_action = NoAction();
        size = 1;
    }

    // The ingress clock: the 48-bit nanosecond global timestamp >> 10, 32-bit ticks of 1.024 us
    // (wrapping every ~73 minutes), from an identity hash of the timestamp's slice in one
    // action (a PHV container cannot hold the timestamp cut at bit 10: it is parsed into whole
    // containers).  Only the flowlet and INT sampler registers read it; the controller writes
    // the flowlet timeout and the sampling gap in these ticks for Tofino (control/fabric.py,
    // TOFINO_INGRESS_CLOCK_NS), whatever their parameters' _us says.  Not microseconds as the
    // egress clock
    // (IntTelemetry.take_time_*): that conversion is three stages of adds, which Tofino 1's
    // twelve stages have no room for before the flowlet registers.
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) time_hash;

    action take_time() {
        md.now_ticks = time_hash.get({ ig_prsr_md.global_tstamp[41:10] });
        md.ingress_port = ig_intr_md.ingress_port;
    }

    // What the flowlet and sampler registers compare with: a stateful ALU compares a cell with
    // a PHV value, it does not subtract first.  LastHop's feedback counter compares with n - 1.
    action take_cutoffs() {
        md.flowlet_cutoff = md.now_ticks - md.flowlet_timeout_us;
        md.int_sample_cutoff = md.now_ticks - md.int_sample_gap_us;
        md.feedback_every_n_minus_1 = (bit<32>)md.feedback_every_n - 1;
    }

    // IPv4 length checks, as v1model's: what the total length leaves after the header (its
    // length the parser set), computed before the comparisons (a gateway compares fields, it
    // does not subtract).
    action ipv4_payload_bytes() {
        md.ipv4_payload_bytes = hdr.ipv4.total_len - md.ipv4_hdr_bytes;
        md.ipv4_short = md.ipv4_hdr_bytes |-| hdr.ipv4.total_len;
    }

    action udp_excess_bytes() {
        md.udp_excess = hdr.udp.length |-| md.ipv4_payload_bytes;
    }

    // The last hop removes the shim and the records from the packet it forwards; the mirror
    // copy for feedback/report is taken of the packet as it arrived (TNA ingress mirroring), so
    // it still carries them.  Done here and not in egress: Tofino 1's egress parser cannot reach
    // past the records of a long path (IceTnaEgressParser).
    action strip_shim() {
        hdr.ethernet.ether_type = hdr.ice_shim.orig_ether_type;
        hdr.ice_shim.setInvalid();
        hdr.int_hops[0].setInvalid();
        hdr.int_hops[1].setInvalid();
        hdr.int_hops[2].setInvalid();
#if ICE_TNA_INT_MAX_HOPS > 3
        hdr.int_hops[3].setInvalid();
        hdr.int_hops[4].setInvalid();
#endif
    }

    action compute_flow_slot() {
        md.flow_slot = flow_slot_hash.get({
            hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol,
            hdr.udp.src_port, hdr.udp.dst_port, hdr.bth.dst_qp });
    }

    // The bucket a new flowlet of this flow would take (LoadBalance): the flow's fields and the
    // time, as v1model's (which hashes its 48-bit microseconds; here the ingress clock's ticks,
    // the same timestamp bits take_time keeps), for every packet at the start so that the
    // flowlet registers need not wait for it.
    action flowlet_bucket() {
        md.flowlet_new_bucket = (bit<8>)flowlet_hash.get({
            hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.udp.src_port,
            hdr.udp.dst_port, hdr.bth.dst_qp, ig_prsr_md.global_tstamp[41:10] });
    }

    action bridge() {
        hdr.bridged.setValid();
        hdr.bridged.md_kind = ICE_MD_BRIDGED;
        hdr.bridged.to_cpu = 0;
        hdr.bridged.ingress_port = ig_intr_md.ingress_port;
        hdr.bridged.switch_id = md.switch_id;
    }

    // A punt's bridged header: to_cpu tells the egress parser that a packet_in follows, and
    // packet_in.egress_port is written again (0 as fill_packet_in wrote it) from a field rather
    // than a constant: bf-p4c's deparser-zero optimisation puts packet_in.egress_port/_pad1,
    // written only with 0 in ingress, into an 8-bit container as one 16-bit run, which the
    // assembler rejects (Invalid register slice).  One action with bridge()'s writes, not a
    // second one after it, so that both take the same (last) stage.
    action bridge_punt() {
        hdr.bridged.setValid();
        hdr.bridged.md_kind = ICE_MD_BRIDGED;
        hdr.bridged.to_cpu = 1;
        hdr.bridged.ingress_port = ig_intr_md.ingress_port;
        hdr.bridged.switch_id = md.switch_id;
        hdr.packet_in.egress_port = md.no_port;
    }

    // The records' largest enq_qdepth (absent records count 0) for the last hop's mirror header
    // (LastHop): computed for every packet at the start, off the forwarding decisions' path.
    action record_qdepths_pairs() {
        md.rec_qdepth0 = max(md.rec_qdepth0, md.rec_qdepth1);
        md.rec_qdepth2 = max(md.rec_qdepth2, md.rec_qdepth3);
    }

    action record_qdepths_max() {
        md.rec_qdepth0 = max(md.rec_qdepth0, md.rec_qdepth2);
    }

    // psn ^ (psn >> PATH_BUCKET_BITS) for IntSampler, for every packet at the start: the shifted
    // PSN from an identity hash of its slice (a shift on the ALU needs the PSN alone in a
    // container, which the BTH header cannot give), then the exclusive or.  (An XOR32 hash of
    // {psn, psn >> 6} in one step is what the hash unit could do, but bf-p4c 34b86e9 places a
    // field used twice in a hash's input once: its assembly xors a single copy of the PSN.)
    Hash<bit<24>>(HashAlgorithm_t.IDENTITY) psn_shift_hash;

    action shift_psn() {
        md.int_sample_psn = psn_shift_hash.get({ hdr.bth.psn[23:PATH_BUCKET_BITS] });
    }

    action mix_psn() {
        md.int_sample_psn = hdr.bth.psn ^ md.int_sample_psn;
    }

    // The sampling mask (PathLookups: int_sampling) applied on the ALU: a gateway compares
    // with constants only.
    action mask_psn() {
        md.int_sample_psn = md.int_sample_psn & md.int_sample_mask;
    }

    apply {
        if (hdr.int_hops[0].isValid()) {
            md.rec_qdepth0 = hdr.int_hops[0].enq_qdepth;
        } else {
            md.rec_qdepth0 = 0;
        }
        if (hdr.int_hops[1].isValid()) {
            md.rec_qdepth1 = hdr.int_hops[1].enq_qdepth;
        } else {
            md.rec_qdepth1 = 0;
        }
        if (hdr.int_hops[2].isValid()) {
            md.rec_qdepth2 = hdr.int_hops[2].enq_qdepth;
        } else {
            md.rec_qdepth2 = 0;
        }
#if ICE_TNA_INT_MAX_HOPS > 3
        if (hdr.int_hops[3].isValid()) {
            md.rec_qdepth3 = hdr.int_hops[3].enq_qdepth;
        } else {
            md.rec_qdepth3 = 0;
        }
#else
        md.rec_qdepth3 = 0;
#endif
        record_qdepths_pairs();
        record_qdepths_max();
        // Computed for every packet, before the decisions that read them: Tofino runs an action
        // as soon as its inputs are ready, and a computation under an `if` waits for the
        // conditions above it.  (The values are read only where v1model computes them.)
        // The settings and the lookups that need nothing computed come first too, unconditional
        // (SwitchConfig's keyless tables and port kind, PathLookups): their results are only
        // metadata, read where v1model applies them.
        compute_flow_slot();
        flowlet_bucket();
        ipv4_payload_bytes();
        udp_excess_bytes();
        take_time();
        queue_config.apply();
        config.apply(md, ig_intr_md.ingress_port);
        path_lookups.apply(hdr, md);
        if (hdr.ipv4.isValid()) {
            route_lookup.apply(hdr, md);
        }
        take_cutoffs();
        shift_psn();
        mix_psn();
        mask_psn();
        port_rx_counter.count(ig_intr_md.ingress_port);
        if (hdr.packet_out.isValid()) {
            send_packet_out();
        } else if (ig_prsr_md.parser_err != 0) {
            md.drop_reason = DROP_REASON_TRUNCATED;
        } else if (md.drop_reason != DROP_REASON_NONE) {
            // a parser check failed (IceTnaIngressParser.malformed)
        } else if (hdr.ipv4.isValid() && md.checksum_error) {
            md.drop_reason = DROP_REASON_BAD_CHECKSUM;
        } else if (hdr.ethernet.ether_type == ETHERTYPE_LLDP) {
            punt_link_probe();
        } else {
            if (hdr.arp.isValid()) {
                arp.apply(hdr, md.ingress_port, ig_tm_md.ucast_egress_port);
            } else if (hdr.ipv4.isValid()) {
                // v1model's order of checks and decisions, written so that no condition reads
                // md.drop_reason after a check wrote it (each such read would wait a stage):
                // the length checks are an if-else chain in front of the forwarding, and the
                // later conditions leave out what their branch already rules out.
                if (md.ipv4_short != 0) {
                    md.drop_reason = DROP_REASON_PARSER_ERROR;
                } else if (hdr.udp.isValid() && md.udp_excess != 0) {
                    md.drop_reason = DROP_REASON_BAD_LENGTH;
                } else if (hdr.ice_shim.isValid() && md.ingress_port_kind == PORT_KIND_HOST) {
                    md.drop_reason = DROP_REASON_SHIM_FROM_HOST;
                } else {
                    if (hdr.udp.isValid() && hdr.udp.dst_port == UDP_PORT_ICE_FEEDBACK
                            && md.ingress_port_kind == PORT_KIND_FABRIC) {
                        ig_tm_md.qid = md.feedback_qid;
                    }
                    // CNPs (DCQCN's feedback) in the same queue, from the first switch on.
                    if (hdr.bth.isValid() && hdr.bth.opcode == ROCE_OP_CNP
                            && hdr.ipv4.total_len == ROCE_CNP_IPV4_BYTES) {
                        ig_tm_md.qid = md.feedback_qid;
                        cnp_rx_counter.count(ig_intr_md.ingress_port);
                    }
                    if (hdr.ice_shim.isValid()) {
                        md.path_tag = hdr.ice_shim.path_tag;
                        md.has_path = true;
                    } else if (hdr.bth.isValid() && md.switch_role == SWITCH_ROLE_LEAF
                            && md.ingress_port_kind == PORT_KIND_HOST) {
                        path_select.apply(hdr, md);
                    }
                    if (md.has_path) {
                        tag_switch.apply(hdr, md, ig_tm_md.ucast_egress_port);
                    }
                    // TagSwitch's drops (unknown tag, hop limit) leave end_path false.
                    if (!md.has_path || md.end_path) {
                        routing.apply(hdr, md, md.ingress_port, ig_tm_md.ucast_egress_port);
                    }
                    // v1model: drop_reason == NONE && strip_shim && routed.  Routing's drops
                    // are the packets it did not send to a port, and strip_shim (end_path on
                    // a shimmed packet, read here at its source) excludes the TTL check; the
                    // route entry's action is known from the start (RouteLookup).
                    if (md.end_path && hdr.ice_shim.isValid()
                            && md.route_kind == ROUTE_TO_PORT) {
                        last_hop.apply(hdr, md, ig_intr_md, ig_dprsr_md, ig_tm_md);
                        strip_shim();
                    }
                }
            } else {
                md.drop_reason = DROP_REASON_UNSUPPORTED;
            }
        }

        if (md.drop_reason != DROP_REASON_NONE) {
            ig_dprsr_md.drop_ctl = 1;
            drop_reason_counter.count(md.drop_reason);
        } else {
            if (hdr.packet_in.isValid()) {
                bridge_punt();
            } else {
                bridge();
            }
        }
    }
}

#endif  // ICE_TNA_INGRESS_P4
