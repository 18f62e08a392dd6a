/*
 * ICE (Intelligent Control Ethernet) data plane, P4_16 for v1model (BMv2 simple_switch_grpc and
 * the icefabric embedded target).  The same program runs on leaves and spines: the controller
 * sets each switch's role and each port's kind through tables (see p4src/README.md).
 *
 * This file only includes and wires.  common/ holds what both architectures share (headers,
 * defines, sizes, the packet_in fill and the controls written once: SwitchConfig, ArpResponder,
 * PathSelect, TagSwitch, Ipv4Routing); v1model/ the v1model structs, parser and the controls
 * built on v1model's externs.  The Tofino program (tna/ice.p4) includes the same common/ files.
 */

// Pin the v1model version: the typed register<T, I> / counter<I> declarations used below are the
// ones published with V1MODEL_VERSION 20200408; p4c's default is the older 20180101 form.
#define V1MODEL_VERSION 20200408

#include <core.p4>
#include <v1model.p4>

#include "common/defines.p4"
#include "common/sizes.p4"
#include "common/headers.p4"
#include "v1model/metadata.p4"
#include "common/punt.p4"
#include "v1model/parser.p4"
#include "v1model/control/verify_checksum.p4"
#include "common/control/switch_config.p4"
#include "common/control/arp.p4"
#include "v1model/control/load_balance.p4"
#include "v1model/control/int_sampler.p4"
#include "v1model/control/path_select.p4"
#include "common/control/tag_switch.p4"
#include "common/control/routing.p4"
#include "v1model/control/last_hop.p4"
#include "v1model/control/ingress.p4"
#include "v1model/control/egress.p4"
#include "v1model/control/compute_checksum.p4"
#include "v1model/control/deparser.p4"

V1Switch(
    IceParser(),
    IceVerifyChecksum(),
    IceIngress(),
    IceEgress(),
    IceComputeChecksum(),
    IceDeparser()
) main;
