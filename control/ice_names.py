"""P4Info names of p4src/ice.p4 that the controller writes (tables, actions, counters, registers).

Checked against the P4Info the embedded target's compiler produces by
tests/unit/control/test_fabric_names.py; regenerate the full list with
``icefabric.control.p4rt.write_names_module`` when the program changes.
"""

from typing import Final

# tables
TABLE_PORT_KIND: Final = "IceIngress.config.port_kind"
TABLE_SWITCH_CONFIG: Final = "IceIngress.config.switch_config"
TABLE_LB_CONFIG: Final = "IceIngress.config.lb_config"
TABLE_QUEUE_CONFIG: Final = "IceIngress.queue_config"
TABLE_TELEMETRY_CONFIG: Final = "IceIngress.config.telemetry_config"
TABLE_ARP_REPLY: Final = "IceIngress.arp.arp_reply"
TABLE_FLOW_PATH: Final = "IceIngress.path_select.flow_path"
TABLE_DST_LEAF: Final = "IceIngress.path_select.dst_leaf"
TABLE_PATH_CANDIDATE: Final = "IceIngress.path_select.path_candidate"
TABLE_INT_POLICY: Final = "IceIngress.path_select.int_policy"
TABLE_TAG_FORWARD: Final = "IceIngress.tag_switch.tag_forward"
TABLE_IPV4_ROUTE: Final = "IceIngress.routing.ipv4_route"
TABLE_EGRESS_PORT_INFO: Final = "IceEgress.int_telemetry.egress_port_info"
TABLE_ECN_CONFIG: Final = "IceEgress.ecn.ecn_config"
TABLE_FEEDBACK_CONFIG: Final = "IceEgress.feedback.feedback_config"
TABLE_REPORT_CONFIG: Final = "IceEgress.report.report_config"

# actions
ACTION_SET_PORT_KIND: Final = "IceIngress.config.set_port_kind"
ACTION_SET_SWITCH_CONFIG: Final = "IceIngress.config.set_switch_config"
ACTION_SET_LB_CONFIG: Final = "IceIngress.config.set_lb_config"
ACTION_SET_QUEUE_PRIORITIES: Final = "IceIngress.set_queue_priorities"
ACTION_SET_TELEMETRY_CONFIG: Final = "IceIngress.config.set_telemetry_config"
ACTION_REPLY_ARP: Final = "IceIngress.arp.reply_arp"
ACTION_SET_PLANNED_PATH: Final = "IceIngress.path_select.set_planned_path"
ACTION_SET_DST_LEAF: Final = "IceIngress.path_select.set_dst_leaf"
ACTION_SET_CANDIDATE_PATH: Final = "IceIngress.path_select.set_candidate_path"
ACTION_ENABLE_INT: Final = "IceIngress.path_select.enable_int"
ACTION_DISABLE_INT: Final = "IceIngress.path_select.disable_int"
ACTION_FORWARD_BY_TAG: Final = "IceIngress.tag_switch.forward_by_tag"
ACTION_END_PATH: Final = "IceIngress.tag_switch.end_path"
ACTION_ROUTE_TO_PORT: Final = "IceIngress.routing.route_to_port"
ACTION_SET_LINK_RATE: Final = "IceEgress.int_telemetry.set_link_rate"
ACTION_SET_ECN_THRESHOLDS: Final = "IceEgress.ecn.set_ecn_thresholds"
ACTION_SET_FEEDBACK_CONFIG: Final = "IceEgress.feedback.set_feedback_config"
ACTION_SET_REPORT_CONFIG: Final = "IceEgress.report.set_report_config"

# counters
COUNTER_PORT_RX_COUNTER: Final = "IceIngress.port_rx_counter"
COUNTER_DROP_REASON_COUNTER: Final = "IceIngress.drop_reason_counter"
COUNTER_PORT_TX_COUNTER: Final = "IceEgress.port_tx_counter"
DIRECT_COUNTER_TAG_FORWARD_COUNTER: Final = "IceIngress.tag_switch.tag_forward_counter"

# values of p4src/common/defines.p4 the controller writes
SWITCH_ROLE_LEAF: Final = 1
SWITCH_ROLE_SPINE: Final = 2
PORT_KIND_HOST: Final = 1
PORT_KIND_FABRIC: Final = 2
LB_MODE_ECMP: Final = 0
LB_MODE_PLANNED_ECMP: Final = 1
LB_MODE_PLANNED_FLOWLET: Final = 2
PATH_KIND_PLANNED: Final = 0
PATH_KIND_FLOWLET: Final = 1
PATH_KIND_ECMP: Final = 2
PATH_BUCKETS: Final = 64
CPU_PORT: Final = 255
ICE_SESSION_FEEDBACK: Final = 100
ICE_SESSION_FEEDBACK_REPORT: Final = 101
ICE_SESSION_REPORT: Final = 102
PUNT_REASON_ARP: Final = 1
PUNT_REASON_TELEMETRY: Final = 2
PUNT_REASON_ROUTE: Final = 3
PUNT_REASON_LINK_PROBE: Final = 4
TAG_FORWARD_TABLE_SIZE: Final = 4096
DROP_REASONS: Final = {
    1: "parser-error",
    2: "truncated",
    3: "bad-checksum",
    4: "bad-length",
    5: "unknown-tag",
    6: "hop-limit",
    7: "ttl-expired",
    8: "no-route",
    9: "unsupported",
    10: "shim-from-host",
    11: "route-drop",
}
