// select with masks, ranges, tuple keys, default and _, lookahead and advance.
#include <core.p4>
#include <v1model.p4>

header probe_t { bit<8> kind; bit<8> sub; bit<16> value; }
header skip_t { bit<8> len; }
header result_t { bit<8> state; bit<8> peek; }

struct headers_t { probe_t probe; skip_t skip; result_t result; }
struct meta_t { bit<8> state; bit<8> peek; }
struct probe_key_t { bit<8> kind; @match(ternary) bit<8> sub; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    value_set<probe_key_t>(4) special;
    state start {
        meta.peek = pkt.lookahead<bit<8>>();
        pkt.extract(hdr.probe);
        transition select(hdr.probe.kind, hdr.probe.sub) {
            special: s_special;
            (0x10, 0x01): s_exact;
            (0x20 &&& 0xF0, _): s_mask;
            (0x30 .. 0x3F, 0x00 .. 0x7F): s_range;
            (0x40, default): s_skip;
            default: s_default;
        }
    }
    state s_special { meta.state = 6; transition accept; }
    state s_exact { meta.state = 1; transition accept; }
    state s_mask { meta.state = 2; transition accept; }
    state s_range { meta.state = 3; transition accept; }
    state s_skip {
        pkt.extract(hdr.skip);
        pkt.advance((bit<32>)hdr.skip.len << 3);
        meta.state = 4;
        transition accept;
    }
    state s_default {
        meta.state = 5;
        transition select(hdr.probe.value) {
            0x0000 .. 0x00FF: accept;
            0xFF00 &&& 0xFF00: reject;
        }
    }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.result.setValid();
        hdr.result.state = meta.state;
        hdr.result.peek = meta.peek;
        if (sm.parser_error != error.NoError) {
            hdr.result.state = 0xE0 | (bit<8>)(bit<4>)meta.state;
        }
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.result); pkt.emit(hdr.probe); pkt.emit(hdr.skip); }
}
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
