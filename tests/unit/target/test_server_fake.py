"""A hand-built Program (P4Info + pipeline from run-time objects) for server tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from icefabric.target.runtime import (
    ActionCall,
    ActionProfile,
    Counter,
    DigestType,
    DirectCounter,
    DirectMeter,
    KeyField,
    Meter,
    Register,
    Table,
)

CPU_PORT = 64

P4INFO_TEXT = """
pkg_info { arch: "v1model" }
tables {
  preamble { id: 33554433 name: "MyIngress.fwd" alias: "fwd" }
  match_fields { id: 1 name: "standard_metadata.ingress_port" bitwidth: 9 match_type: EXACT }
  action_refs { id: 16777217 }
  action_refs { id: 16777218 }
  action_refs { id: 16777219 }
  direct_resource_ids: 318767105
  size: 4
}
tables {
  preamble { id: 33554434 name: "MyIngress.acl" alias: "acl" }
  match_fields { id: 1 name: "hdr.ethernet.etherType" bitwidth: 16 match_type: TERNARY }
  match_fields { id: 2 name: "meta.l4" bitwidth: 16 match_type: RANGE }
  match_fields { id: 3 name: "meta.proto" bitwidth: 8 match_type: OPTIONAL }
  action_refs { id: 16777219 }
  action_refs { id: 16777220 }
  size: 8
}
tables {
  preamble { id: 33554435 name: "MyIngress.ecmp" alias: "ecmp" }
  match_fields { id: 1 name: "meta.dst" bitwidth: 8 match_type: EXACT }
  action_refs { id: 16777217 }
  implementation_id: 285212673
  size: 8
}
tables {
  preamble { id: 33554436 name: "MyIngress.routes" alias: "routes" }
  match_fields { id: 1 name: "hdr.ipv4.dstAddr" bitwidth: 32 match_type: LPM }
  action_refs { id: 16777217 }
  action_refs { id: 16777220 }
  direct_resource_ids: 352321537
  size: 64
}
actions { preamble { id: 16777217 name: "MyIngress.set_port" alias: "set_port" }
  params { id: 1 name: "port" bitwidth: 9 } }
actions { preamble { id: 16777218 name: "MyIngress.to_cpu" alias: "to_cpu" } }
actions { preamble { id: 16777219 name: "MyIngress.drop" alias: "drop" } }
actions { preamble { id: 16777220 name: "NoAction" alias: "NoAction" } }
action_profiles {
  preamble { id: 285212673 name: "MyIngress.ecmp_sel" alias: "ecmp_sel" }
  table_ids: 33554435
  with_selector: true
  size: 16
  max_group_size: 4
}
counters {
  preamble { id: 302055425 name: "MyIngress.pkts" alias: "pkts" }
  spec { unit: BOTH }
  size: 8
}
direct_counters {
  preamble { id: 318767105 name: "MyIngress.fwd_ctr" alias: "fwd_ctr" }
  spec { unit: BOTH }
  direct_table_id: 33554433
}
meters {
  preamble { id: 335544321 name: "MyIngress.mtr" alias: "mtr" }
  spec { unit: PACKETS }
  size: 4
}
direct_meters {
  preamble { id: 352321537 name: "MyIngress.route_meter" alias: "route_meter" }
  spec { unit: BYTES }
  direct_table_id: 33554436
}
controller_packet_metadata {
  preamble { id: 67146229 name: "packet_in" alias: "packet_in" annotations: "@controller_header(\\"packet_in\\")" }
  metadata { id: 1 name: "ingress_port" bitwidth: 9 }
  metadata { id: 2 name: "_pad" bitwidth: 7 }
}
controller_packet_metadata {
  preamble { id: 67121543 name: "packet_out" alias: "packet_out" annotations: "@controller_header(\\"packet_out\\")" }
  metadata { id: 1 name: "egress_port" bitwidth: 9 }
  metadata { id: 2 name: "_pad" bitwidth: 7 }
}
registers {
  preamble { id: 385875969 name: "MyIngress.r" alias: "r" }
  type_spec { bitstring { bit { bitwidth: 32 } } }
  size: 4
}
digests {
  preamble { id: 402653185 name: "learn_t" alias: "learn_t" }
  type_spec { struct { name: "learn_t" } }
}
"""


def p4info() -> p4info_pb2.P4Info:
    return text_format.Parse(P4INFO_TEXT, p4info_pb2.P4Info())


@dataclass
class Ctx:
    data: bytes
    port: int

    def copy(self) -> Ctx:
        return Ctx(self.data, self.port)


@dataclass
class IngressResult:
    ctx: Ctx
    drop: bool = False
    egress_spec: int = 0
    mcast_grp: int = 0
    clone: Any = None
    resubmit: Any = None
    digests: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)
    truncate: Any = None


@dataclass
class EgressResult:
    data: bytes | None
    drop: bool = False
    clone: Any = None
    recirculate: Any = None


class Pipeline:
    def __init__(self, env: Any) -> None:
        clock = env.clock
        self.fwd_ctr = DirectCounter("MyIngress.fwd_ctr", "packets_and_bytes", "MyIngress.fwd")
        self.route_meter = DirectMeter(
            "MyIngress.route_meter", "bytes", "MyIngress.routes", clock=clock
        )
        self.sel = ActionProfile("MyIngress.ecmp_sel", 16, selector="crc16", max_group_size=4)
        self.tables = {
            "MyIngress.fwd": Table(
                "MyIngress.fwd",
                [KeyField("standard_metadata.ingress_port", "exact", 9)],
                ["MyIngress.set_port", "MyIngress.to_cpu", "MyIngress.drop"],
                4,
                ActionCall("MyIngress.drop"),
                direct_counter=self.fwd_ctr,
            ),
            "MyIngress.acl": Table(
                "MyIngress.acl",
                [
                    KeyField("hdr.ethernet.etherType", "ternary", 16),
                    KeyField("meta.l4", "range", 16),
                    KeyField("meta.proto", "optional", 8),
                ],
                ["MyIngress.drop", "NoAction"],
                8,
                ActionCall("NoAction"),
            ),
            "MyIngress.ecmp": Table(
                "MyIngress.ecmp",
                [KeyField("meta.dst", "exact", 8), KeyField("hdr.ipv4.srcAddr", "selector", 32)],
                ["MyIngress.set_port"],
                8,
                ActionCall("NoAction"),
                action_profile=self.sel,
            ),
            "MyIngress.routes": Table(
                "MyIngress.routes",
                [KeyField("hdr.ipv4.dstAddr", "lpm", 32)],
                ["MyIngress.set_port", "NoAction"],
                64,
                ActionCall("NoAction"),
                direct_meter=self.route_meter,
            ),
        }
        self.action_profiles = {"MyIngress.ecmp_sel": self.sel}
        self.counters = {"MyIngress.pkts": Counter("MyIngress.pkts", 8, "packets_and_bytes")}
        self.direct_counters = {"MyIngress.fwd_ctr": self.fwd_ctr}
        self.meters = {"MyIngress.mtr": Meter("MyIngress.mtr", 4, "packets", clock=clock)}
        self.direct_meters = {"MyIngress.route_meter": self.route_meter}
        self.registers = {"MyIngress.r": Register("MyIngress.r", 4, 32)}
        self.digests = {"learn_t": DigestType("learn_t", [48, 9])}

    def ingress(
        self,
        data: bytes,
        ingress_port: int,
        *,
        instance_type: int = 0,
        preserved: Any = None,
        packet_length: int | None = None,
    ) -> IngressResult:
        if ingress_port == CPU_PORT:
            hdr = int.from_bytes(data[:2], "big")
            return IngressResult(Ctx(data[2:], ingress_port), egress_spec=hdr >> 7)
        self.counters["MyIngress.pkts"].count(ingress_port % 8, len(data))
        self.registers["MyIngress.r"].write(0, ingress_port)
        res = IngressResult(Ctx(data, ingress_port))
        action, _ = self.tables["MyIngress.fwd"].lookup((ingress_port,), len(data))
        if action.name == "MyIngress.set_port":
            res.egress_spec = action.params[0]
        elif action.name == "MyIngress.to_cpu":
            res.egress_spec = CPU_PORT
        else:
            res.drop, res.egress_spec = True, 511
        if data[:1] == b"\xdd":
            res.digests.append(("learn_t", (int.from_bytes(data[1:7], "big"), ingress_port)))
        return res

    def egress(self, ctx: Ctx, *, egress_port: int, **kw: Any) -> EgressResult:
        if egress_port == CPU_PORT:
            return EgressResult((ctx.port << 7).to_bytes(2, "big") + ctx.data)
        return EgressResult(ctx.data)


class FakeProgram:
    name = "fake.p4"

    def __init__(self) -> None:
        self.p4info = p4info()

    def instantiate(self, env: Any) -> Pipeline:
        return Pipeline(env)


def loader(data: bytes) -> FakeProgram:
    from icefabric.target.server.errors import invalid

    if data != b"fake-program":
        raise invalid("fake loader: device config must be b'fake-program'")
    return FakeProgram()
