#ifndef ICE_SWITCH_CONFIG_P4
#define ICE_SWITCH_CONFIG_P4

// Per-switch and per-port settings.  The controller writes these once when it takes over a
// switch (and again when the operator changes a mode); until then every value is 0, which means
// "role unset, ECMP, no telemetry": the switch still routes plain IPv4.
// Shared by both architectures (ports are the device's port numbers).
control SwitchConfig(inout ice_ingress_metadata_t md,
                     in port_id_t ingress_port) {

    action set_port_kind(bit<8> kind) {
        md.ingress_port_kind = kind;
    }

    // Written by the controller for every port: PORT_KIND_HOST towards servers,
    // PORT_KIND_FABRIC towards other switches.
    table port_kind {
        key = {
            ingress_port : exact @name("ingress_port");
        }
        actions = {
            set_port_kind;
            @defaultonly NoAction;
        }
        default_action = NoAction();
        size = PORT_KIND_TABLE_SIZE;
    }

    action set_switch_config(switch_id_t switch_id, bit<8> role, bit<8> hop_limit) {
        md.switch_id = switch_id;
        md.switch_role = role;
        md.initial_hop_limit = hop_limit;
    }

    // Keyless: the controller sets the default action (switch id, SWITCH_ROLE_*, initial
    // shim hop limit; 0 means ICE_DEFAULT_HOP_LIMIT).
    table switch_config {
        key = { }
        actions = {
            set_switch_config;
            NoAction;
        }
        default_action = NoAction();
        size = 1;
    }

    action set_lb_config(bit<8> mode, bit<1> use_qp_in_hash, bit<32> flowlet_timeout_us) {
        md.lb_mode = mode;
        md.use_qp_in_hash = use_qp_in_hash;
        md.flowlet_timeout_us = flowlet_timeout_us;
    }

    // Keyless: LB_MODE_*, whether ECMP hashes the BTH destination QP too (E-ECMP), and the
    // idle gap after which a flowlet may move to another path.
    table lb_config {
        key = { }
        actions = {
            set_lb_config;
            NoAction;
        }
        default_action = NoAction();
        size = 1;
    }

    action set_telemetry_config(bit<16> feedback_every_n, bit<1> report_enabled) {
        md.feedback_every_n = feedback_every_n;
        md.report_enabled = report_enabled;
    }

    // Keyless, used by the last hop: return feedback to the sender every Nth packet of a flow
    // (0: never) and offer a copy to the report sampler in the egress (IceEgress.report).
    table telemetry_config {
        key = { }
        actions = {
            set_telemetry_config;
            NoAction;
        }
        default_action = NoAction();
        size = 1;
    }

    apply {
        port_kind.apply();
        switch_config.apply();
        lb_config.apply();
        telemetry_config.apply();
        if (md.initial_hop_limit == 0) {
            md.initial_hop_limit = ICE_DEFAULT_HOP_LIMIT;
        }
    }
}

#endif  // ICE_SWITCH_CONFIG_P4
