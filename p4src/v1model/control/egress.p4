#ifndef ICE_EGRESS_P4
#define ICE_EGRESS_P4

#include "int.p4"
#include "ecn.p4"
#include "feedback.p4"
#include "report.p4"

// Egress wiring.  Two kinds of packets arrive here: data packets (instance NORMAL) and the
// last hop's copies (LastHop's I2E clone, marked by md.last_hop_copy in its preserved field
// list), which leave either on a fabric port as feedback or on the CPU port as a report.
control IceEgress(inout headers_t hdr,
                  inout local_metadata_t md,
                  inout standard_metadata_t standard_metadata) {

    // Indexed by egress port: data packets sent (copies are not counted here).
    counter<bit<32>>(PORT_SLOTS, CounterType.packets_and_bytes) port_tx_counter;

    IntTelemetry() int_telemetry;
    EcnMarker() ecn;
    FeedbackBuilder() feedback;
    ReportBuilder() report;

    // Last hop: the host gets the packet exactly as its sender built it.
    action strip_shim() {
        hdr.ethernet.ether_type = hdr.ice_shim.orig_ether_type;
        hdr.ice_shim.setInvalid();
        hdr.int_hops[0].setInvalid();
        hdr.int_hops[1].setInvalid();
        hdr.int_hops[2].setInvalid();
        hdr.int_hops[3].setInvalid();
        hdr.int_hops[4].setInvalid();
    }

    apply {
        md.is_copy = standard_metadata.instance_type != PKT_INSTANCE_TYPE_NORMAL
            && md.last_hop_copy == 1;
        if (md.is_copy || standard_metadata.egress_port != CPU_PORT) {
            int_telemetry.apply(hdr, md, standard_metadata);
        }
        if (md.is_copy) {
            if (standard_metadata.egress_port == CPU_PORT) {
                report.apply(hdr, md, standard_metadata);
            } else {
                feedback.apply(hdr, md, standard_metadata);
            }
        } else {
            if (standard_metadata.egress_port != CPU_PORT) {
                ecn.apply(hdr, md, standard_metadata);
                if (md.strip_shim) {
                    strip_shim();
                }
            }
            port_tx_counter.count((bit<32>)standard_metadata.egress_port);
        }
    }
}

#endif  // ICE_EGRESS_P4
