/*
 * ICE (Intelligent Control Ethernet) data plane, P4_16 for v1model (BMv2 simple_switch_grpc and
 * the icefabric embedded target).  The same program runs on leaves and spines: the controller
 * sets each switch's role and each port's kind through tables (see p4src/README.md).
 *
 * This file only includes and wires; every control lives in its own file under include/control/.
 */

// Pin the v1model version: the typed register<T, I> / counter<I> declarations used below are the
// ones published with V1MODEL_VERSION 20200408; p4c's default is the older 20180101 form.
#define V1MODEL_VERSION 20200408

#include <core.p4>
#include <v1model.p4>

#include "include/defines.p4"
#include "include/sizes.p4"
#include "include/headers.p4"
#include "include/metadata.p4"
#include "include/parser.p4"
#include "include/control/verify_checksum.p4"
#include "include/control/ingress.p4"
#include "include/control/egress.p4"
#include "include/control/compute_checksum.p4"
#include "include/control/deparser.p4"

V1Switch(
    IceParser(),
    IceVerifyChecksum(),
    IceIngress(),
    IceEgress(),
    IceComputeChecksum(),
    IceDeparser()
) main;
