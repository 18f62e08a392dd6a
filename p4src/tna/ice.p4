/*
 * ICE data plane for the Tofino Native Architecture: one source for Tofino 1 (tna.p4) and
 * Tofino 2 (t2na.p4), chosen by the compiler's __TARGET_TOFINO__ (bf-p4c --target tofino|tofino2,
 * or -D__TARGET_TOFINO__=1|2 with p4test).  The same behaviour and, wherever TNA allows, the same
 * P4Runtime names as the v1model program (p4src/ice.p4); the wire formats, constants, sizes and
 * the controls written once for both (SwitchConfig, ArpResponder, PathSelect, TagSwitch,
 * Ipv4Routing) are p4src/common/, shared.  Every place where Tofino forces a different design says so
 * in a comment; p4src/README.md has the feature-by-feature table.
 *
 * This file only includes and wires.
 */

#include <core.p4>
#if __TARGET_TOFINO__ == 2
#include <t2na.p4>
#else
#include <tna.p4>
#endif

// The CPU (PCIe) port differs by chip and pipe count (Tofino 1 model: 64; hardware: 192 on a
// 2-pipe, 320 on a 4-pipe Tofino 1).  Give the one of your switch with -DICE_TNA_CPU_PORT=N;
// the controller's topology spec must name the same port (defaults.cpu_port).
#ifndef ICE_TNA_CPU_PORT
#define ICE_TNA_CPU_PORT 64
#endif

#include "../common/defines.p4"
#include "../common/sizes.p4"
#include "../common/headers.p4"
#include "metadata.p4"
#include "../common/punt.p4"
#include "parser.p4"
#include "../common/control/switch_config.p4"
#include "../common/control/arp.p4"
#include "control/load_balance.p4"
#include "control/int_sampler.p4"
#include "control/path_select.p4"
#include "../common/control/tag_switch.p4"
#include "control/routing.p4"
#include "control/last_hop.p4"
#include "control/ingress.p4"
#include "control/egress.p4"
#include "control/deparser.p4"

Pipeline(
    IceTnaIngressParser(),
    IceIngress(),
    IceIngressDeparser(),
    IceTnaEgressParser(),
    IceEgress(),
    IceEgressDeparser()
) pipe;

Switch(pipe) main;
