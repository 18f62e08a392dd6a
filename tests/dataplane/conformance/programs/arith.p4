// Bit-exact arithmetic: wrap-around, saturation, signed values, shifts, slices, concat, casts.
#include <core.p4>
#include <v1model.p4>

const int BIG = 1 << 70;
typedef int<8> s8_t;

header in_t { bit<8> a; bit<8> b; s8_t sa; s8_t sb; bit<8> sh; }
header out_t {
    bit<8> add; bit<8> sub; bit<8> mul; bit<8> sadd; bit<8> ssub;
    s8_t sadd_s; s8_t ssub_s; s8_t swrap;
    bit<8> shl; bit<8> shr; s8_t ashr; bit<8> neg; bit<8> inv;
    bit<16> cat; bit<8> slice; bit<16> sext; bit<8> cmp; bit<8> div; bit<8> mod;
    bit<8> mix; bit<8> sl_assign; bit<8> big; bit<8> logic; bit<8> fn;
}
struct headers_t { in_t i; out_t o; }
struct meta_t { }

bit<8> twice_plus(in bit<8> x, in bit<8> y) {
    return (x << 1) + y;
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.i); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        bit<8> a = hdr.i.a;
        bit<8> b = hdr.i.b;
        hdr.o.setValid();
        hdr.o.add = a + b;
        hdr.o.sub = a - b;
        hdr.o.mul = a * b;
        hdr.o.sadd = a |+| b;
        hdr.o.ssub = a |-| b;
        hdr.o.sadd_s = hdr.i.sa |+| hdr.i.sb;
        hdr.o.ssub_s = hdr.i.sa |-| hdr.i.sb;
        hdr.o.swrap = hdr.i.sa + hdr.i.sb;
        hdr.o.shl = a << hdr.i.sh;
        hdr.o.shr = a >> hdr.i.sh;
        hdr.o.ashr = hdr.i.sa >> hdr.i.sh;
        hdr.o.neg = -a;
        hdr.o.inv = ~a;
        hdr.o.cat = a ++ b;
        hdr.o.slice = (a ++ b)[11:4];
        hdr.o.sext = (bit<16>)(int<16>)hdr.i.sa;
        hdr.o.cmp = (hdr.i.sa < hdr.i.sb) ? 8w1 : 8w0;
        hdr.o.div = a / 3;
        hdr.o.mod = a % 3;
        hdr.o.mix = (a & 0xF0) | (b ^ 0x0F);
        hdr.o.sl_assign = b;
        hdr.o.sl_assign[7:4] = a[3:0];
        hdr.o.big = (bit<8>)(BIG >> 66);
        hdr.o.logic = ((a == b) || !(a > b)) ? 8w0xAA : 8w0x55;
        hdr.o.fn = twice_plus(a, b);
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.i); pkt.emit(hdr.o); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
