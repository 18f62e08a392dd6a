// Registers, counters, meters, a direct counter, and ternary/range/optional tables with
// priorities (const entries and control-plane entries).
#include <core.p4>
#include <v1model.p4>
#include "include/common.p4"

header tag_t { bit<8> cls; bit<8> color; bit<16> seen; }
struct headers_t { ethernet_t eth; tag_t tag; }
struct meta_t { bit<8> cls; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.eth); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<bit<16>, bit<32>>(16) seen_per_port;
    counter<bit<32>>(16, CounterType.packets_and_bytes) port_counter;
    meter<bit<32>>(4, MeterType.packets) port_meter;
    direct_counter(CounterType.packets) cls_hits;

    action set_cls(bit<8> cls) { meta.cls = cls; }
    table classify {
        key = {
            hdr.eth.ether_type: ternary;
            hdr.eth.dst[7:0]: range @name("dst_low");
            hdr.eth.src[7:0]: optional;
        }
        actions = { set_cls; NoAction; }
        counters = cls_hits;
        const entries = {
            // p4c refuses `priority =` in const entries; its BMv2 back end orders them by
            // @priority (lowest first) or else by position
            @priority(20) (0x0800 &&& 0xFFFF, 0 .. 255, _) : set_cls(1);
            @priority(10) (0x0800 &&& 0xFF00, 10 .. 20, _) : set_cls(2);
            @priority(30) (_, _, 0x77) : set_cls(3);
        }
        default_action = NoAction();
    }
    apply {
        bit<16> n;
        seen_per_port.read(n, (bit<32>)sm.ingress_port);
        n = n + 1;
        seen_per_port.write((bit<32>)sm.ingress_port, n);
        port_counter.count((bit<32>)sm.ingress_port);
        bit<8> color;
        port_meter.execute_meter<bit<8>>(0, color);
        classify.apply();
        hdr.tag.setValid();
        hdr.tag.cls = meta.cls;
        hdr.tag.color = color;
        hdr.tag.seen = n;
        sm.egress_spec = 1;
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); pkt.emit(hdr.tag); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
