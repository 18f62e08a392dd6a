#ifndef ICE_TNA_EGRESS_P4
#define ICE_TNA_EGRESS_P4

#include "int.p4"
#include "ecn.p4"
#include "feedback.p4"
#include "report.p4"

// Egress wiring, as the v1model IceEgress: data packets (bridged header) get statistics, their
// INT record and ECN; last-hop copies (mirror header) become feedback on a fabric port or a
// report on the CPU port.  The last hop's shim strip is done by ingress (IceIngress.strip_shim:
// Tofino 1's egress parser cannot reach the end of a long record stack).  What ingress put in
// front of the packet is removed here (the deparser emits only valid headers).
control IceEgress(inout ice_egress_headers_t hdr,
                  inout ice_egress_metadata_t md,
                  in egress_intrinsic_metadata_t eg_intr_md,
                  in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                  inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                  inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {

    // Indexed by egress port: data packets sent (copies are not counted here).
    Counter<bit<64>, PortId_t>(PORT_SLOTS, CounterType_t.PACKETS_AND_BYTES) port_tx_counter;

    IntTelemetry() int_telemetry;
    EcnMarker() ecn;
    FeedbackBuilder() feedback;
    ReportBuilder() report;

    apply {
        md.is_copy = hdr.mirror_md.isValid();
        if (md.is_copy || eg_intr_md.egress_port != CPU_PORT) {
            int_telemetry.apply(hdr, md, eg_intr_md, eg_prsr_md);
        }
        if (md.is_copy) {
            if (eg_intr_md.egress_port == CPU_PORT) {
                report.apply(hdr, md, eg_dprsr_md);
            } else {
                feedback.apply(hdr, md);
            }
        } else {
            if (eg_intr_md.egress_port != CPU_PORT) {
                ecn.apply(hdr, md, eg_intr_md);
            }
            port_tx_counter.count(eg_intr_md.egress_port);
        }
        hdr.bridged.setInvalid();
        hdr.mirror_md.setInvalid();
    }
}

#endif  // ICE_TNA_EGRESS_P4
