#ifndef ICE_ECN_P4
#define ICE_ECN_P4

// RED-style ECN marking of ECT packets on the egress queue depth the packet met at enqueue
// (enq_qdepth, in packets on v1model), as DCQCN expects from the switch:
//   depth <= Kmin        never marked
//   Kmin < depth < Kmax  marked with probability (depth - Kmin) / (Kmax - Kmin), thinned by
//                        pmax_mask: a mark also needs (draw2 & pmax_mask) == 0, so
//                        Pmax = 1 / (pmax_mask + 1) for a mask of the form 2^k - 1
//   depth >= Kmax        always marked
// The "random" draws are hashes of the packet and the egress timestamp: deterministic for a
// given packet and time (repeatable tests), uniform enough across packets.  (A Tofino port
// would take the draw from its random extern and the ramp from a range-match table: no divide.)
control EcnMarker(inout headers_t hdr,
                  inout local_metadata_t md,
                  inout standard_metadata_t standard_metadata) {

    action set_ecn_thresholds(bit<32> kmin, bit<32> kmax, bit<32> pmax_mask) {
        md.ecn_kmin = kmin;
        md.ecn_kmax = kmax;
        md.ecn_pmax_mask = pmax_mask;
        md.ecn_enabled = true;
    }

    // Written by the controller: per egress port, or for all ports through the default action.
    table ecn_config {
        key = {
            standard_metadata.egress_port : exact @name("egress_port");
        }
        actions = {
            set_ecn_thresholds;
            NoAction;
        }
        default_action = NoAction();
        size = ECN_CONFIG_TABLE_SIZE;
    }

    // Indexed by egress port: packets this switch marked CE (an operator's "ECN marked"
    // counter; read by the controller's Prometheus endpoint next to the port counters).
    counter<bit<32>>(PORT_SLOTS, CounterType.packets) ecn_marked_counter;

    action mark_ce() {
        hdr.ipv4.ecn = 3;
        ecn_marked_counter.count((bit<32>)standard_metadata.egress_port);
    }

    apply {
        if (hdr.ipv4.isValid() && (hdr.ipv4.ecn == 1 || hdr.ipv4.ecn == 2)) {
            ecn_config.apply();
            if (md.ecn_enabled) {
                bit<32> qdepth = (bit<32>)standard_metadata.enq_qdepth;
                if (qdepth >= md.ecn_kmax) {
                    mark_ce();
                } else if (qdepth > md.ecn_kmin) {
                    bit<32> draw;
                    bit<32> thin;
                    // An ECN-capable packet need not be UDP or RoCE: a field of an invalid
                    // header holds whatever an earlier packet left there on BMv2 (0 on the
                    // embedded target), so the hashes read only valid headers.
                    bit<16> src_port = hdr.udp.isValid() ? hdr.udp.src_port : 16w0;
                    bit<24> psn = hdr.bth.isValid() ? hdr.bth.psn : 24w0;
                    hash(draw, HashAlgorithm.crc32, 32w0,
                         { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.identification,
                           src_port, psn,
                           standard_metadata.egress_global_timestamp, qdepth },
                         md.ecn_kmax - md.ecn_kmin);
                    hash(thin, HashAlgorithm.crc16, 32w0,
                         { hdr.ipv4.identification, psn,
                           standard_metadata.egress_global_timestamp, qdepth },
                         32w65536);
                    if (draw < qdepth - md.ecn_kmin && (thin & md.ecn_pmax_mask) == 0) {
                        mark_ce();
                    }
                }
            }
        }
    }
}

#endif  // ICE_ECN_P4
