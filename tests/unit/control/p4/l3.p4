/*
 * A small L3 router for the P4Runtime client tests (icefabric.control.p4rt).
 * The control-plane names match tests/unit/control/p4/l3_fixture.p4info.txtpb, so the same
 * tests run against a fake server with that P4Info and against the embedded target.
 * CPU port 255: a packet-out carries its egress port in the packet_out header; a packet sent
 * to port 255 reaches the controller as a packet-in carrying its ingress port.
 */
#include <core.p4>
#include <v1model.p4>

const bit<9> CPU_PORT = 255;
const bit<16> TYPE_IPV4 = 0x0800;
const bit<8> PROTO_TCP = 6;

typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;

@controller_header("packet_in")
header packet_in_t {
    bit<9> ingress_port;
    bit<7> _pad;
}

@controller_header("packet_out")
header packet_out_t {
    bit<9> egress_port;
    bit<7> _pad;
}

header ethernet_t {
    mac_addr_t dstAddr;
    mac_addr_t srcAddr;
    bit<16> etherType;
}

header ipv4_t {
    bit<4> version;
    bit<4> ihl;
    bit<8> diffserv;
    bit<16> totalLen;
    bit<16> identification;
    bit<3> flags;
    bit<13> fragOffset;
    bit<8> ttl;
    bit<8> protocol;
    bit<16> hdrChecksum;
    ipv4_addr_t srcAddr;
    ipv4_addr_t dstAddr;
}

header tcp_t {
    bit<16> srcPort;
    bit<16> dstPort;
    bit<32> seqNo;
    bit<32> ackNo;
    bit<4> dataOffset;
    bit<4> res;
    bit<8> flags;
    bit<16> window;
    bit<16> checksum;
    bit<16> urgentPtr;
}

struct learn_t {
    mac_addr_t srcAddr;
    bit<9> ingress_port;
}

struct metadata_t {
    bit<2> color;
    learn_t learn;
}

struct headers_t {
    packet_out_t packet_out;
    packet_in_t packet_in;
    ethernet_t ethernet;
    ipv4_t ipv4;
    tcp_t tcp;
}

parser MyParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        transition select(standard_metadata.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out {
        packet.extract(hdr.packet_out);
        transition parse_ethernet;
    }
    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            TYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) {
            PROTO_TCP: parse_tcp;
            default: accept;
        }
    }
    state parse_tcp {
        packet.extract(hdr.tcp);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    counter(512, CounterType.packets_and_bytes) port_counter;
    direct_counter(CounterType.packets_and_bytes) ipv4_counter;
    meter(64, MeterType.bytes) port_meter;
    register<bit<64>>(1024) flow_bytes;
    action_selector(HashAlgorithm.crc16, 32w128, 32w16) ecmp_selector;

    action drop() {
        mark_to_drop(standard_metadata);
    }

    action set_nhop(mac_addr_t dmac, bit<9> port) {
        hdr.ethernet.srcAddr = hdr.ethernet.dstAddr;
        hdr.ethernet.dstAddr = dmac;
        standard_metadata.egress_spec = port;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    action to_cpu() {
        standard_metadata.egress_spec = CPU_PORT;
    }

    // Written by the controller's base forwarding: one route per prefix.
    table ipv4_lpm {
        key = {
            hdr.ipv4.dstAddr: lpm;
        }
        actions = {
            set_nhop;
            drop;
            NoAction;
        }
        size = 1024;
        default_action = drop();
        counters = ipv4_counter;
    }

    // Written by operators: punt or drop by source, TCP port range and ingress port.
    table acl {
        key = {
            hdr.ipv4.srcAddr: ternary;
            hdr.tcp.dstPort: range;
            standard_metadata.ingress_port: optional;
            hdr.ipv4.protocol: exact;
        }
        actions = {
            drop;
            to_cpu;
            NoAction;
        }
        size = 256;
        default_action = NoAction();
    }

    // Written by the planner: ECMP groups per destination host.
    table ecmp_group {
        key = {
            hdr.ipv4.dstAddr: exact;
            hdr.ipv4.srcAddr: selector;
            hdr.tcp.srcPort: selector;
        }
        actions = {
            set_nhop;
            NoAction;
        }
        implementation = ecmp_selector;
        size = 128;
    }

    apply {
        if (hdr.packet_out.isValid()) {
            standard_metadata.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
        } else {
            port_counter.count((bit<32>) standard_metadata.ingress_port);
            port_meter.execute_meter<bit<2>>((bit<32>) standard_metadata.ingress_port, meta.color);
            if (hdr.ipv4.isValid()) {
                bit<64> total;
                flow_bytes.read(total, (bit<32>) standard_metadata.ingress_port);
                flow_bytes.write((bit<32>) standard_metadata.ingress_port,
                                 total + (bit<64>) standard_metadata.packet_length);
                if (!ecmp_group.apply().hit) {
                    ipv4_lpm.apply();
                }
                acl.apply();
            }
        }
        if (standard_metadata.egress_spec == CPU_PORT) {
            meta.learn.srcAddr = hdr.ethernet.srcAddr;
            meta.learn.ingress_port = standard_metadata.ingress_port;
            digest<learn_t>(1, meta.learn);
        }
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        if (standard_metadata.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = standard_metadata.ingress_port;
            hdr.packet_in._pad = 0;
        }
    }
}

control MyComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(
            hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum,
            HashAlgorithm.csum16);
    }
}

control MyDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.tcp);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
