#ifndef ICE_DEFINES_P4
#define ICE_DEFINES_P4

// Shared by the v1model (p4src/ice.p4) and TNA (p4src/tna/ice.p4) programs: nothing here may
// name an architecture's types or externs.

// ---------------------------------------------------------------------------------------------
// Types shared by every control.
// ---------------------------------------------------------------------------------------------
typedef bit<9>  port_id_t;
typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;
typedef bit<16> path_tag_t;
typedef bit<32> switch_id_t;
typedef bit<16> leaf_id_t;
typedef bit<8>  drop_reason_t;
typedef bit<8>  punt_reason_t;

// ---------------------------------------------------------------------------------------------
// Wire constants.  0x88B5 is IEEE 802 "Local Experimental EtherType 1": the ICE shim never
// leaves the fabric, so a local experimental type is the honest choice.
// ---------------------------------------------------------------------------------------------
const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<16> ETHERTYPE_ARP  = 0x0806;
const bit<16> ETHERTYPE_ICE  = 0x88B5;
// IEEE 802.1AB LLDP: the controller's link-liveness probes (packet-out on one switch, punted
// as packet-in by the switch at the other end of the link).
const bit<16> ETHERTYPE_LLDP = 0x88CC;

const bit<16> ARP_HTYPE_ETHERNET = 1;
const bit<16> ARP_OPER_REQUEST   = 1;
const bit<16> ARP_OPER_REPLY     = 2;

const bit<8>  IP_PROTO_ICMP = 1;
const bit<8>  IP_PROTO_UDP  = 17;

const bit<16> UDP_PORT_ROCEV2       = 4791;
// A RoCEv2 congestion notification packet (DCQCN's CNP): BTH opcode 0x81; its IPv4 packet is
// always 60 bytes (IPv4 20, UDP 8, BTH 12, 16 reserved, ICRC 4).
const bit<8>  ROCE_OP_CNP           = 0x81;
const bit<16> ROCE_CNP_IPV4_BYTES   = 60;
// Feedback packets travel as plain IPv4/UDP to the sender's host agent (routed like any packet).
const bit<16> UDP_PORT_ICE_FEEDBACK = 4792;
// Feedback is control traffic: send it in the expedited-forwarding class.
const bit<6>  ICE_FEEDBACK_DSCP     = 46;
const bit<8>  ICE_FEEDBACK_TTL      = 64;

const bit<4>  ICE_VERSION = 1;
const bit<8>  ICE_DEFAULT_HOP_LIMIT = 16;

// Byte lengths of the headers the egress builds (truncate() and IPv4/UDP lengths need them).
const bit<32> ETHERNET_BYTES      = 14;
const bit<32> IPV4_MIN_BYTES      = 20;
const bit<32> UDP_BYTES           = 8;
const bit<32> ICE_SHIM_BYTES      = 8;
const bit<32> ICE_FEEDBACK_BYTES  = 36;
const bit<32> TELEMETRY_REPORT_BYTES = 36;
const bit<32> PACKET_IN_BYTES     = 5;
// INT_HOP_BYTES is 36 = 32 + 4: the pipeline multiplies by it with two shifts (no multiplier
// on a Tofino-class ALU).

// CPU_PORT is the architecture's: v1model/metadata.p4 (255, simple_switch_grpc --cpu-port 255
// and the embedded target), tna/metadata.p4 (-DICE_TNA_CPU_PORT, by chip and pipe count).

// ---------------------------------------------------------------------------------------------
// Values the controller writes into table parameters.
// ---------------------------------------------------------------------------------------------
const bit<8> SWITCH_ROLE_UNSET = 0;
const bit<8> SWITCH_ROLE_LEAF  = 1;
const bit<8> SWITCH_ROLE_SPINE = 2;

const bit<8> PORT_KIND_UNSET  = 0;
const bit<8> PORT_KIND_HOST   = 1;
const bit<8> PORT_KIND_FABRIC = 2;

// Load-balancing mode of first-hop RoCEv2 flows (IceIngress.config.lb_config).
const bit<8> LB_MODE_ECMP            = 0;  // baseline: 5-tuple ECMP over candidates only
const bit<8> LB_MODE_PLANNED_ECMP    = 1;  // planned path, else ECMP
const bit<8> LB_MODE_PLANNED_FLOWLET = 2;  // planned path, else flowlet, (ECMP never)
const bit<8> LB_MODE_SPRAY           = 3;  // per packet: bucket = BTH PSN mod PATH_BUCKETS (no plans)

// How the first hop chose the path (carried in the shim and in feedback/report).
const bit<2> PATH_KIND_PLANNED = 0;
const bit<2> PATH_KIND_FLOWLET = 1;
const bit<2> PATH_KIND_ECMP    = 2;
const bit<2> PATH_KIND_SPRAY   = 3;

// packet_in.reason
const punt_reason_t PUNT_REASON_ARP       = 1;
const punt_reason_t PUNT_REASON_TELEMETRY = 2;
const punt_reason_t PUNT_REASON_ROUTE     = 3;
const punt_reason_t PUNT_REASON_LINK_PROBE = 4;  // LLDP frame from a neighbour (link liveness)

// telemetry_report.reason bits
const bit<4> REPORT_REASON_SAMPLED     = 1;
const bit<4> REPORT_REASON_QUEUE_ALARM = 2;

// Index of IceIngress.drop_reason_counter.  0 means "not dropped".
const drop_reason_t DROP_REASON_NONE            = 0;
const drop_reason_t DROP_REASON_PARSER_ERROR    = 1;   // malformed header (bad version, ihl ...)
const drop_reason_t DROP_REASON_TRUNCATED       = 2;   // parser ran out of bytes
const drop_reason_t DROP_REASON_BAD_CHECKSUM    = 3;   // IPv4 header checksum wrong
const drop_reason_t DROP_REASON_BAD_LENGTH      = 4;   // IPv4/UDP length beyond the frame
const drop_reason_t DROP_REASON_UNKNOWN_TAG     = 5;   // shim path tag not in tag_forward
const drop_reason_t DROP_REASON_HOP_LIMIT       = 6;   // shim hop limit exhausted
const drop_reason_t DROP_REASON_TTL_EXPIRED     = 7;   // IPv4 TTL <= 1 on a routed hop
const drop_reason_t DROP_REASON_NO_ROUTE        = 8;   // ipv4_route miss
const drop_reason_t DROP_REASON_UNSUPPORTED     = 9;   // neither IPv4, ARP nor ICE
const drop_reason_t DROP_REASON_SHIM_FROM_HOST  = 10;  // a host tried to inject a path tag
const drop_reason_t DROP_REASON_ROUTE_DROP      = 11;  // ipv4_route entry says drop

// Clone sessions the controller must create (P4Runtime CloneSessionEntry):
//   ICE_SESSION_FEEDBACK        one replica: the port towards the spines (feedback only)
//   ICE_SESSION_FEEDBACK_REPORT two replicas: that port and CPU_PORT (feedback + report)
//   ICE_SESSION_REPORT          one replica: CPU_PORT (report only)
const bit<32> ICE_SESSION_FEEDBACK        = 100;
const bit<32> ICE_SESSION_FEEDBACK_REPORT = 101;
const bit<32> ICE_SESSION_REPORT          = 102;

// Egress queue priorities (standard_metadata.priority).  simple_switch DROPS a packet whose
// priority is >= its number of queues per port (1 unless started with --priority-queues N), so
// nothing is raised above PRIORITY_DATA until the controller, which knows N from the topology
// spec, writes IceIngress.queue_config: then controller packet-outs and link-probe punts go in
// the highest queue and ICE feedback crossing a switch in the one below (with
// feedback_every_n = 1 there are as many as data packets: probes must not wait behind them).
const bit<3> PRIORITY_DATA = 0;

// ---------------------------------------------------------------------------------------------
// Parser errors of ICE's own checks (core.p4 declares the standard ones).
// ---------------------------------------------------------------------------------------------
error {
    IceBadVersion,
    IceTooManyHops,
    IceBadInnerType,
    Ipv4BadVersion,
    Ipv4IhlTooSmall,
    Ipv4TotalLenTooSmall,
    UdpLengthTooSmall
}

#endif  // ICE_DEFINES_P4
