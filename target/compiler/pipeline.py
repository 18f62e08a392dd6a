"""One pass through a compiled v1model pipeline: ingress (parser..ingress) and egress (..deparser)."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from icefabric.target.compiler.calls import (
    R_CLONE,
    R_DIGESTS,
    R_LEN_DELTA,
    R_PAYLOAD,
    R_RECIRC,
    R_RESUBMIT,
    R_TRUNC,
)
from icefabric.target.compiler.instantiate import build_namespace
from icefabric.target.compiler.rt import AssertFailed, ExitControl, ParserError
from icefabric.target.runtime.clock import Clock

if TYPE_CHECKING:
    from icefabric.target.compiler.program import Program

DROP_PORT = 511
INSTANCE_NORMAL, INSTANCE_INGRESS_CLONE, INSTANCE_EGRESS_CLONE = 0, 1, 2
INSTANCE_COALESCED, INSTANCE_RECIRC, INSTANCE_REPLICATION, INSTANCE_RESUBMIT = 3, 4, 5, 6


@dataclass(slots=True)
class PipelineEnv:
    """What a pipeline instance needs from the switch around it."""

    clock: Clock = field(default_factory=Clock)
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("icefabric.target.p4"))
    log_msg: Callable[[str], None] | None = None
    seed: int | None = None  # seed of random() and of the 'random' hash algorithm


@dataclass(slots=True)
class CloneRequest:
    """A clone()/clone_preserving_field_list() call: I2E or E2E, session, field list."""

    session_id: int
    field_list_id: int | None
    kind: str = "I2E"


class PacketContext:
    """The per-packet state between passes: slots (headers, metadata), payload, original bytes."""

    __slots__ = ("S", "original", "payload", "pipeline")

    def __init__(self, S: list[Any], payload: bytes, original: bytes, pipeline: Pipeline) -> None:
        self.S = S
        self.payload = payload
        self.original = original
        self.pipeline = pipeline

    def copy(self) -> PacketContext:
        """An independent copy (for multicast replicas and clones)."""
        return PacketContext(self.S[:], self.payload, self.original, self.pipeline)

    def preserved_fields(self, field_list_id: int | None) -> dict[str, int]:
        """Values of the user-metadata fields tagged ``@field_list(field_list_id)``."""
        if field_list_id is None:
            return {}
        fl = self.pipeline.program.compiled.field_lists.get(field_list_id, [])
        return {path: self.S[slot] for path, slot in fl}

    def field(self, path: str) -> Any:
        """Read a header/metadata value by P4 path: 'hdr.ipv4.ttl', 'meta.x', 'standard_metadata.x'."""
        return self.S[self.pipeline.slot_of(path)]


@dataclass(slots=True)
class IngressResult:
    """What the traffic manager needs after ingress."""

    ctx: PacketContext
    drop: bool
    egress_spec: int
    mcast_grp: int
    clone: CloneRequest | None
    resubmit: int | None
    recirculate_requested: int | None
    digests: list[tuple[str, tuple[int, ...]]]
    truncate: int | None
    parser_error: int

    def preserved(self, field_list_id: int | None) -> dict[str, int]:
        """Field values preserved for resubmit/clone with this field list id."""
        return self.ctx.preserved_fields(field_list_id)


@dataclass(slots=True)
class EgressResult:
    """What leaves egress: the deparsed bytes (None when dropped) and E2E/recirculate requests."""

    data: bytes | None
    drop: bool
    clone: CloneRequest | None
    recirculate: int | None
    ctx: PacketContext | None = None
    digests: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)
    clone_ctx: PacketContext | None = None  # E2E clone: headers as egress left them

    def preserved(self, field_list_id: int | None) -> dict[str, int]:
        """Field values preserved for recirculate/clone with this field list id."""
        return self.ctx.preserved_fields(field_list_id) if self.ctx is not None else {}


class Pipeline:
    """A program instance with its own tables/registers/counters; runs ingress and egress passes."""

    def __init__(self, program: Program, env: PipelineEnv) -> None:
        self.program = program
        self.env = env
        comp = program.compiled
        self.rng = random.Random(env.seed)
        log_msg = env.log_msg or (lambda s: env.log.info("log_msg: %s", s))
        ns, objs = build_namespace(program, env, self.rng, log_msg)
        exec(program.code, ns)
        self.tables = objs["tables"]
        self.action_profiles = objs["action_profiles"]
        self.counters = objs["counters"]
        self.direct_counters = objs["direct_counters"]
        self.meters = objs["meters"]
        self.direct_meters = objs["direct_meters"]
        self.registers = objs["registers"]
        self.digests = objs["digests"]
        self.value_sets = objs["value_sets"]
        self.cpu_port_metadata = program.cpu_port_metadata
        self._tpl = list(comp.template)
        e = comp.entry
        self._parse = ns[e["parser"]]
        self._verify = ns[e["verify"]]
        self._ingress = ns[e["ingress"]]
        self._egress = ns[e["egress"]]
        self._compute = ns[e["compute"]]
        self._deparse = ns[e["deparser"]]
        sm = comp.sm_slots
        self._sm = sm
        self._s_in_port = sm["ingress_port"]
        self._s_itype = sm["instance_type"]
        self._s_plen = sm["packet_length"]
        self._s_igts = sm["ingress_global_timestamp"]
        self._s_perr = sm["parser_error"]
        self._s_espec = sm["egress_spec"]
        self._s_mcast = sm["mcast_grp"]
        self._s_eport = sm["egress_port"]
        self._s_rid = sm["egress_rid"]
        self._s_enq_ts = sm["enq_timestamp"]
        self._s_enq_qd = sm["enq_qdepth"]
        self._s_deq_td = sm["deq_timedelta"]
        self._s_deq_qd = sm["deq_qdepth"]
        self._s_egts = sm["egress_global_timestamp"]
        self._s_qid = sm.get("qid")  # the target's v1model has it; p4c's does not
        self._meta_paths = comp.meta_paths
        self._clock = env.clock

    def slot_of(self, path: str) -> int:
        """The state slot of a scalar field given as 'hdr.x.y', 'meta.x' or 'standard_metadata.x'."""
        return self.program.slot_of(path)

    # ---- ingress ------------------------------------------------------------------------------
    def new_state(self) -> list[Any]:
        """A fresh per-packet state (all headers invalid, metadata zero)."""
        return self._tpl[:]

    def ingress(
        self,
        data: bytes,
        ingress_port: int,
        *,
        instance_type: int = 0,
        preserved: dict[str, int] | None = None,
        packet_length: int | None = None,
    ) -> IngressResult:
        """Parser, verifyChecksum and ingress control for one packet arriving on a port."""
        ctx = self.parse(
            data,
            ingress_port,
            instance_type=instance_type,
            preserved=preserved,
            packet_length=packet_length,
        )
        S = ctx.S
        try:  # noqa: SIM105 (try/except is free on the fast path)
            self._verify(S)
        except ExitControl:
            pass  # P4 `exit`: this control ends, the packet goes on
        try:
            self._ingress(S)
        except ExitControl:
            pass  # P4 `exit`: this control ends, the packet goes on
        except AssertFailed as exc:
            self.env.log.error("assert/assume failed at %s: packet dropped", exc)
            S[self._s_espec] = DROP_PORT
        ctx.payload = S[R_PAYLOAD]
        clone = S[R_CLONE]
        req = CloneRequest(clone[1], clone[2], clone[0]) if clone is not None else None
        spec = S[self._s_espec]
        digests = S[R_DIGESTS]
        return IngressResult(
            ctx,
            spec == DROP_PORT,
            spec,
            S[self._s_mcast],
            req,
            S[R_RESUBMIT],
            S[R_RECIRC],
            [(n, f(S)) for n, f in digests] if digests else [],
            S[R_TRUNC],
            S[self._s_perr],
        )

    def parse(
        self,
        data: bytes,
        ingress_port: int,
        *,
        instance_type: int = 0,
        preserved: dict[str, int] | None = None,
        packet_length: int | None = None,
    ) -> PacketContext:
        """Run only the parser (fresh metadata): the context of a packet entering ingress.

        Also what an I2E clone carries to egress: BMv2 gives the clone the headers as parsed
        and resets metadata except the preserved field list.  A parser error does not drop:
        standard_metadata.parser_error is set and the unparsed rest stays payload.
        """
        S = self._tpl[:]
        S[self._s_in_port] = ingress_port
        S[self._s_itype] = instance_type
        S[self._s_plen] = len(data) if packet_length is None else packet_length
        S[self._s_igts] = self._clock.now_us()
        if preserved:
            self._restore(S, preserved)
        try:
            pos = self._parse(S, data, len(data) << 3)
        except ParserError as exc:
            pos = exc.pos
            if exc.code >= 0:
                S[self._s_perr] = exc.code
        payload = data[pos >> 3 :] if pos else data
        S[R_PAYLOAD] = payload
        return PacketContext(S, payload, data, self)

    def _restore(self, S: list[Any], preserved: dict[str, int]) -> None:
        for path, value in preserved.items():
            slot = self._meta_paths.get(path)
            if slot is not None:
                S[slot] = value

    # ---- egress -------------------------------------------------------------------------------
    def egress(
        self,
        ctx: PacketContext,
        *,
        egress_port: int,
        egress_rid: int = 0,
        instance_type: int = 0,
        enq_timestamp: int = 0,
        enq_qdepth: int = 0,
        deq_timedelta: int = 0,
        deq_qdepth: int = 0,
        preserved: dict[str, int] | None = None,
        qid: int = 0,
    ) -> EgressResult:
        """Egress control, computeChecksum and deparser; returns the bytes that leave."""
        S = ctx.S
        if S[R_LEN_DELTA]:
            # BMv2 re-reads packet_length in egress from its packet-length register, which
            # setValid()/setInvalid() in ingress moved by the header sizes.
            S[self._s_plen] = max(S[self._s_plen] + S[R_LEN_DELTA], 0)
            S[R_LEN_DELTA] = 0
        S[self._s_eport] = egress_port
        S[self._s_rid] = egress_rid
        S[self._s_itype] = instance_type
        S[self._s_enq_ts] = enq_timestamp & 0xFFFFFFFF
        S[self._s_enq_qd] = enq_qdepth & 0x7FFFF
        S[self._s_deq_td] = deq_timedelta & 0xFFFFFFFF
        S[self._s_deq_qd] = deq_qdepth & 0x7FFFF
        if self._s_qid is not None:
            S[self._s_qid] = qid & 0x1F
        S[self._s_egts] = self._clock.now_us()
        S[R_CLONE] = None
        S[R_RECIRC] = None
        S[R_DIGESTS] = None
        if preserved:
            self._restore(S, preserved)
        try:
            self._egress(S)
        except ExitControl:
            pass  # P4 `exit`: this control ends, the packet goes on
        except AssertFailed as exc:
            self.env.log.error("assert/assume failed at %s: packet dropped", exc)
            S[self._s_espec] = DROP_PORT
        clone = S[R_CLONE]
        req = CloneRequest(clone[1], clone[2], clone[0]) if clone is not None else None
        clone_ctx = self.clone_context(ctx, req) if req is not None else None
        recirc = S[R_RECIRC]
        digests = [(n, f(S)) for n, f in S[R_DIGESTS]] if S[R_DIGESTS] else []
        if S[self._s_espec] == DROP_PORT:
            return EgressResult(None, True, req, None, ctx, digests, clone_ctx)
        try:  # noqa: SIM105
            self._compute(S)
        except ExitControl:
            pass  # P4 `exit`: this control ends, the packet goes on
        data = self.deparse(ctx)
        return EgressResult(data, False, req, recirc, ctx, digests, clone_ctx)

    def deparse(self, ctx: PacketContext) -> bytes:
        """Run the deparser on a context: valid headers in emit order, then the payload."""
        acc, nb = self._deparse(ctx.S)
        pad = -nb % 8
        head = (acc << pad).to_bytes((nb + pad) >> 3, "big") if nb else b""
        out: bytes = head + ctx.S[R_PAYLOAD]
        trunc = ctx.S[R_TRUNC]
        if trunc is not None and trunc < len(out):
            out = out[:trunc]
        return out

    def deparse_after_ingress(self, ctx: PacketContext) -> bytes:
        """The packet as the deparser would emit it right after ingress (no egress pass)."""
        return self.deparse(ctx)

    # ---- clones -------------------------------------------------------------------------------
    def clone_context(self, ctx: PacketContext, req: CloneRequest) -> PacketContext:
        """The context of a clone as BMv2 makes it.

        I2E: the original packet re-parsed (headers as parsed, metadata reset) plus the
        preserved field list.  E2E: the packet as egress left it (headers kept), metadata reset
        plus the preserved field list.
        """
        keep = ctx.preserved_fields(req.field_list_id)
        if req.kind == "I2E":
            return self.parse(
                ctx.original,
                ctx.S[self._sm["ingress_port"]],
                instance_type=INSTANCE_INGRESS_CLONE,
                preserved=keep,
            )
        else:
            S = ctx.S[:]
            comp = self.program.compiled
            for region in (comp.meta, comp.sm):
                b = region.sbase or 0
                n = region.type.slots
                S[b : b + n] = self._tpl[b : b + n]
            S[R_CLONE] = S[R_RECIRC] = S[R_DIGESTS] = S[R_TRUNC] = None
            new = PacketContext(S, ctx.payload, ctx.original, self)
            S[self._sm["packet_length"]] = ctx.S[self._sm["packet_length"]]
        self._restore(S, keep)
        S[self._sm["ingress_port"]] = ctx.S[self._sm["ingress_port"]]
        return new
