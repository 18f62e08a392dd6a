"""A hand-written Pipeline following the LANG contract (section 2), for device tests.

Packet byte 0 is an opcode, byte 1 an argument, byte 2 a second argument:
0 forward to port arg | 1 drop | 2 multicast group arg | 3 resubmit once then forward arg |
4 forward arg and recirculate once in egress | 5 clone I2E to session arg2, forward arg |
6 digest (arg) and forward | 7 raise | 8 clone E2E to session arg2, forward arg.
Egress prepends [instance_type, egress_rid, enq_qdepth, deq_qdepth, pass, meta] to the data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from icefabric.target.runtime import DigestType


@dataclass
class Ctx:
    data: bytes
    meta: dict[str, int] = field(default_factory=dict)

    def copy(self) -> Ctx:
        return Ctx(self.data, dict(self.meta))

    def preserved_fields(self, field_list: int) -> dict[str, int]:
        return {"meta.m": self.meta.get("m", 0)}


@dataclass
class IngressResult:
    ctx: Ctx
    drop: bool = False
    egress_spec: int = 0
    mcast_grp: int = 0
    clone: tuple[int, int | None] | None = None
    resubmit: int | None = None
    digests: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)
    truncate: int | None = None


@dataclass
class EgressResult:
    data: bytes | None
    drop: bool = False
    clone: tuple[int, int | None] | None = None
    recirculate: int | None = None
    ctx: Ctx | None = None


class FakePipeline:
    def __init__(self) -> None:
        self.digests = {"learn": DigestType("learn", [8, 16])}
        self.tables: dict[str, Any] = {}
        self.ingress_calls: list[tuple[int, int, dict[str, int] | None]] = []

    def parse(
        self,
        data: bytes,
        ingress_port: int,
        *,
        instance_type: int = 0,
        preserved: dict[str, int] | None = None,
        packet_length: int | None = None,
    ) -> Ctx:
        meta = {"m": (preserved or {}).get("meta.m", 0), "pass": 0}
        return Ctx(data, meta)

    def ingress(
        self,
        data: bytes,
        ingress_port: int,
        *,
        instance_type: int = 0,
        preserved: dict[str, int] | None = None,
        packet_length: int | None = None,
    ) -> IngressResult:
        self.ingress_calls.append((ingress_port, instance_type, preserved))
        if len(data) < 3:
            return IngressResult(Ctx(data), drop=True, egress_spec=511)
        op, arg, arg2 = data[0], data[1], data[2]
        ctx = Ctx(data, {"m": (preserved or {}).get("meta.m", 0) + 1, "pass": instance_type})
        res = IngressResult(ctx, egress_spec=arg)
        if op == 1:
            res.drop, res.egress_spec = True, 511
        elif op == 2:
            res.mcast_grp = arg
        elif op == 3 and instance_type != 6:
            res.resubmit = 1
        elif op == 5:
            res.clone = (arg2, 1)
        elif op == 6:
            res.digests.append(("learn", (arg, 0x1234)))
        elif op == 7:
            raise RuntimeError("boom")
        return res

    def egress(
        self,
        ctx: Ctx,
        *,
        egress_port: int,
        egress_rid: int,
        instance_type: int,
        enq_timestamp: int,
        enq_qdepth: int,
        deq_timedelta: int,
        deq_qdepth: int,
        preserved: dict[str, int] | None = None,
    ) -> EgressResult:
        op = ctx.data[0] if ctx.data else 0
        out = (
            bytes(
                [
                    instance_type,
                    egress_rid & 0xFF,
                    enq_qdepth,
                    deq_qdepth,
                    ctx.meta.get("pass", 0),
                    ctx.meta.get("m", 0) & 0xFF,
                ]
            )
            + ctx.data
        )
        res = EgressResult(out, ctx=ctx)
        if op == 4 and instance_type != 4:
            res.recirculate = 1
            res.data = bytes([0]) + ctx.data[1:]  # recirculated packet is forwarded normally
        if op == 8 and instance_type == 0:
            res.clone = (ctx.data[2], 1)
        return res
