"""The agent channel's wire protocol: versioned, length-framed JSON between host agents and the
controller.

Frame: a 4-byte big-endian unsigned length, then that many bytes of UTF-8 JSON holding one
object (at most :data:`MAX_FRAME` bytes, nesting at most :data:`MAX_DEPTH` levels). Every message
carries ``"v"`` (:data:`PROTOCOL_VERSION`) and ``"type"``:

=========== ==================== ==========================================================
type        direction            fields
=========== ==================== ==========================================================
hello       agent -> controller  ``host``, ``token`` (TCP; null on a Unix socket)
welcome     controller -> agent  ``heartbeat_s``, ``controller`` (name), ``session`` (int)
flows       agent -> controller  ``flows``: list of FlowReport objects (upserts; state
                                 ``done`` removes a flow); ``replace`` true: forget the
                                 host's other flows first (the snapshot an agent sends
                                 after every (re)connect, chunked: the first frame
                                 replaces, the rest add)
caps        controller -> agent  ``caps``: list of ``{"key": FlowKey, "bps": float}``; with
                                 ``more`` false it completes the host's whole cap set (a
                                 flow not listed has no cap); ``more`` true: continued in
                                 the next caps frame; optional ``starts``: list of
                                 ``{"dst": "a.b.c.d/len", "bps": float}``, the rates a flow
                                 with no cap starts at per destination prefix (part of the
                                 same set; a prefix not listed: the line rate)
heartbeat   both                 ``seq``
bye         both                 ``reason``
=========== ==================== ==========================================================

A receiver that gets a frame it cannot decode as one of these counts it and ignores it; only a
frame whose length exceeds the bound ends the connection (the stream cannot be resynchronised).
"""

from __future__ import annotations

import ipaddress
import json
import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from icefabric.control.flowkey import FlowKey
from icefabric.files import JsonError, parse_json

PROTOCOL_VERSION = 1
MAX_FRAME = 4 * 1024 * 1024
MAX_DEPTH = 8
MAX_FLOWS_PER_FRAME = 4096  # with the longest names about 2 MiB; larger sets go in several frames
MAX_NAME = 255  # host, job and flow id strings
_HEADER = struct.Struct("!I")

FLOW_STATES = ("pending", "active", "done")
FlowState = Literal["pending", "active", "done"]
MESSAGE_TYPES = ("hello", "welcome", "flows", "caps", "heartbeat", "bye")


class ProtocolError(Exception):
    """A frame or message that does not follow the protocol (one-line reason)."""


class FrameTooLarge(ProtocolError):
    """A frame longer than the bound: the connection must be closed."""


def key_from_dict(data: Any, *, where: str = "key") -> FlowKey:
    """Validate and build a flow key from its wire form (``FlowKey.to_dict``); ProtocolError
    naming the field otherwise."""
    if not isinstance(data, dict):
        raise ProtocolError(f"{where}: expected an object, got {type(data).__name__}")
    return FlowKey(
        src_ip=_ipv4(data, "src_ip", where),
        dst_ip=_ipv4(data, "dst_ip", where),
        udp_sport=_int(data, "sport", where, 0, 0xFFFF),
        udp_dport=_int(data, "dport", where, 0, 0xFFFF),
        dst_qp=_int(data, "qp", where, 0, (1 << 24) - 1),
    )


@dataclass(slots=True, frozen=True, kw_only=True)
class FlowReport:
    """An agent's report of one local flow: the job's flow it carries and its real key."""

    job: str
    flow_id: str
    key: FlowKey
    state: FlowState = "active"
    rate_bps: float | None = None  # the agent's current sending rate, when it has one
    bytes_sent: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON."""
        return {
            "job": self.job,
            "flow_id": self.flow_id,
            "key": self.key.to_dict(),
            "state": self.state,
            "rate_bps": self.rate_bps,
            "bytes_sent": self.bytes_sent,
        }

    @classmethod
    def from_dict(cls, data: Any, *, where: str = "flow") -> FlowReport:
        """Validate and build a report (ProtocolError naming the field otherwise)."""
        if not isinstance(data, dict):
            raise ProtocolError(f"{where}: expected an object, got {type(data).__name__}")
        state = data.get("state", "active")
        if state not in FLOW_STATES:
            raise ProtocolError(f"{where}.state: expected one of {FLOW_STATES}, got {state!r}")
        rate = data.get("rate_bps")
        if rate is not None:
            rate = _rate(rate, f"{where}.rate_bps")
        return cls(
            job=_name(data, "job", where, allow_empty=True),
            flow_id=_name(data, "flow_id", where, allow_empty=True),
            key=key_from_dict(data.get("key"), where=f"{where}.key"),
            state=state,
            rate_bps=rate,
            bytes_sent=_int(data, "bytes_sent", where, 0, 1 << 62, default=0),
        )


@dataclass(slots=True, frozen=True, kw_only=True)
class Hello:
    """An agent introducing itself (first message on a connection)."""

    host: str
    token: str | None = None
    type: Literal["hello"] = field(default="hello", init=False)


@dataclass(slots=True, frozen=True, kw_only=True)
class Welcome:
    """The controller accepting an agent."""

    heartbeat_s: float
    controller: str = "icectl"
    session: int = 0
    type: Literal["welcome"] = field(default="welcome", init=False)


@dataclass(slots=True, frozen=True, kw_only=True)
class Flows:
    """Flow reports (upserts; ``done`` removes)."""

    flows: tuple[FlowReport, ...]
    replace: bool = False  # forget the host's other flows first
    type: Literal["flows"] = field(default="flows", init=False)


@dataclass(slots=True, frozen=True, kw_only=True)
class Caps:
    """The complete set of caps for one host, bit/s per flow key."""

    caps: Mapping[FlowKey, float]
    more: bool = False  # the set continues in the next caps frame
    # (destination prefix, bit/s): where an uncapped flow starts (control/congestion/starts.py)
    starts: tuple[tuple[str, float], ...] = ()
    type: Literal["caps"] = field(default="caps", init=False)


@dataclass(slots=True, frozen=True, kw_only=True)
class Heartbeat:
    """Liveness, both directions."""

    seq: int
    type: Literal["heartbeat"] = field(default="heartbeat", init=False)


@dataclass(slots=True, frozen=True, kw_only=True)
class Bye:
    """An orderly close (or a refusal, with the reason)."""

    reason: str = ""
    type: Literal["bye"] = field(default="bye", init=False)


Message = Hello | Welcome | Flows | Caps | Heartbeat | Bye


def to_dict(msg: Message) -> dict[str, Any]:
    """A message as the JSON object sent on the wire."""
    out: dict[str, Any] = {"v": PROTOCOL_VERSION, "type": msg.type}
    if isinstance(msg, Hello):
        out.update(host=msg.host, token=msg.token)
    elif isinstance(msg, Welcome):
        out.update(heartbeat_s=msg.heartbeat_s, controller=msg.controller, session=msg.session)
    elif isinstance(msg, Flows):
        out["flows"] = [f.to_dict() for f in msg.flows]
        out["replace"] = msg.replace
    elif isinstance(msg, Caps):
        out["caps"] = [{"key": k.to_dict(), "bps": float(v)} for k, v in msg.caps.items()]
        out["more"] = msg.more
        if msg.starts:
            out["starts"] = [{"dst": d, "bps": float(v)} for d, v in msg.starts]
    elif isinstance(msg, Heartbeat):
        out["seq"] = msg.seq
    else:
        out["reason"] = msg.reason
    return out


def from_dict(data: Any) -> Message:
    """Validate one decoded JSON object and build its message (ProtocolError otherwise)."""
    if not isinstance(data, dict):
        raise ProtocolError(f"message: expected an object, got {type(data).__name__}")
    version = data.get("v")
    if type(version) is not int or version != PROTOCOL_VERSION:  # true == 1 in Python
        raise ProtocolError(f"message.v: expected {PROTOCOL_VERSION}, got {version!r}")
    kind = data.get("type")
    if kind == "hello":
        token = data.get("token")
        if token is not None and (not isinstance(token, str) or len(token) > 1024):
            raise ProtocolError("hello.token: expected a string of at most 1024 characters")
        return Hello(host=_name(data, "host", "hello"), token=token)
    if kind == "welcome":
        hb = data.get("heartbeat_s")
        if not isinstance(hb, int | float) or isinstance(hb, bool) or not 0.01 <= hb <= 3600:
            raise ProtocolError(f"welcome.heartbeat_s: expected 0.01..3600 seconds, got {hb!r}")
        return Welcome(
            heartbeat_s=float(hb),
            controller=_name(data, "controller", "welcome"),
            session=_int(data, "session", "welcome", 0, 1 << 62, default=0),
        )
    if kind == "flows":
        items = _list(data, "flows", "flows")
        replace = data.get("replace", False)
        if not isinstance(replace, bool):
            raise ProtocolError(f"flows.replace: expected true or false, got {_short(replace)}")
        return Flows(
            flows=tuple(
                FlowReport.from_dict(f, where=f"flows.flows[{i}]") for i, f in enumerate(items)
            ),
            replace=replace,
        )
    if kind == "caps":
        items = _list(data, "caps", "caps")
        caps: dict[FlowKey, float] = {}
        for i, c in enumerate(items):
            where = f"caps.caps[{i}]"
            if not isinstance(c, dict):
                raise ProtocolError(f"{where}: expected an object, got {type(c).__name__}")
            caps[key_from_dict(c.get("key"), where=f"{where}.key")] = _rate(
                c.get("bps"), f"{where}.bps"
            )
        more = data.get("more", False)
        if not isinstance(more, bool):
            raise ProtocolError(f"caps.more: expected true or false, got {_short(more)}")
        return Caps(caps=caps, more=more, starts=_starts(data))
    if kind == "heartbeat":
        return Heartbeat(seq=_int(data, "seq", "heartbeat", 0, 1 << 62))
    if kind == "bye":
        reason = data.get("reason", "")
        if not isinstance(reason, str):
            raise ProtocolError("bye.reason: expected a string")
        return Bye(reason=reason[:1024])
    raise ProtocolError(f"message.type: expected one of {MESSAGE_TYPES}, got {kind!r}")


def _starts(data: Mapping[str, Any]) -> tuple[tuple[str, float], ...]:
    if "starts" not in data:
        return ()
    items = _list(data, "starts", "caps")
    out = []
    for i, st in enumerate(items):
        where = f"caps.starts[{i}]"
        if not isinstance(st, dict):
            raise ProtocolError(f"{where}: expected an object, got {type(st).__name__}")
        dst = st.get("dst")
        try:
            net = ipaddress.IPv4Network(dst) if isinstance(dst, str) and len(dst) <= 18 else None
        except ValueError:
            net = None
        if net is None:
            raise ProtocolError(
                f"{where}.dst: expected an IPv4 prefix a.b.c.d/len, got {_short(dst)}"
            )
        out.append((str(net), _rate(st.get("bps"), f"{where}.bps")))
    return tuple(out)


def encode(msg: Message) -> bytes:
    """One message as a frame (ProtocolError when it would exceed the frame bound)."""
    body = json.dumps(to_dict(msg), separators=(",", ":"), allow_nan=False).encode()
    if len(body) > MAX_FRAME:
        raise ProtocolError(f"frame of {len(body)} bytes exceeds the limit of {MAX_FRAME}")
    return _HEADER.pack(len(body)) + body


def decode_body(body: bytes) -> Message:
    """Decode one frame's body (ProtocolError with the reason when it is not a message)."""
    try:  # bounded nesting and integer length: Python's own limits raise past them
        data = parse_json(body, max_depth=MAX_DEPTH)
    except JsonError as exc:
        raise ProtocolError(f"frame is not JSON: {exc}") from None
    if _depth(data) > MAX_DEPTH:
        raise ProtocolError(f"frame nests deeper than {MAX_DEPTH} levels")
    return from_dict(data)


def caps_frames(caps: Mapping[FlowKey, float], starts: tuple[tuple[str, float], ...] = ()) -> bytes:
    """A host's complete cap set (and start table) as the controller sends it: caps frames of
    at most :data:`MAX_FLOWS_PER_FRAME` entries of each, every one but the last with ``more``
    (one empty frame for an empty set: "no caps")."""
    items = list(caps.items())
    n = max(len(items), len(starts), 1)
    return b"".join(
        encode(
            Caps(
                caps=dict(items[i : i + MAX_FLOWS_PER_FRAME]),
                more=i + MAX_FLOWS_PER_FRAME < n,
                starts=tuple(starts[i : i + MAX_FLOWS_PER_FRAME]),
            )
        )
        for i in range(0, n, MAX_FLOWS_PER_FRAME)
    )


class CapsAssembler:
    """The agent's side of :func:`caps_frames`: caps frames in, complete cap sets out (the
    start table of the last complete set in :attr:`starts`)."""

    def __init__(self) -> None:
        self._pending: dict[FlowKey, float] = {}
        self._pending_starts: list[tuple[str, float]] = []
        self.starts: tuple[tuple[str, float], ...] = ()

    def add(self, msg: Caps) -> dict[FlowKey, float] | None:
        """Take one caps frame; the host's whole cap set when this frame completes it."""
        self._pending.update(msg.caps)
        self._pending_starts.extend(msg.starts)
        if msg.more:
            return None
        out, self._pending = self._pending, {}
        self.starts, self._pending_starts = tuple(self._pending_starts), []
        return out


class FrameReader:
    """Splits a byte stream into frame bodies; feed it what the socket returned."""

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self._buf = bytearray()
        self._max = max_frame

    def feed(self, data: bytes) -> list[bytes]:
        """The complete frame bodies now available (FrameTooLarge on an oversize length)."""
        self._buf += data
        out: list[bytes] = []
        while len(self._buf) >= _HEADER.size:
            (length,) = _HEADER.unpack_from(self._buf)
            if length > self._max:
                raise FrameTooLarge(f"frame length {length} exceeds the limit of {self._max}")
            end = _HEADER.size + length
            if len(self._buf) < end:
                break
            out.append(bytes(self._buf[_HEADER.size : end]))
            del self._buf[:end]
        return out

    def allow(self, max_frame: int) -> None:
        """Change the frame bound (e.g. raise it once the peer is authenticated)."""
        self._max = max_frame

    @property
    def pending(self) -> int:
        """Bytes buffered that do not yet form a whole frame."""
        return len(self._buf)


@dataclass(slots=True, frozen=True, kw_only=True)
class AgentAddress:
    """Where the controller's agent channel listens: a Unix-domain socket path or TCP."""

    path: Path | None = None
    host: str = ""
    port: int = 0

    @property
    def is_unix(self) -> bool:
        """True for a Unix-domain socket."""
        return self.path is not None

    def __str__(self) -> str:
        return f"unix:{self.path}" if self.path is not None else f"tcp:{self.host}:{self.port}"


def parse_address(text: str | Path | AgentAddress) -> AgentAddress:
    """``unix:PATH``, a path, or ``tcp:HOST:PORT`` / ``HOST:PORT`` (ValueError otherwise)."""
    if isinstance(text, AgentAddress):
        return text
    if isinstance(text, Path):
        return AgentAddress(path=text)
    if text.startswith("unix:"):
        return AgentAddress(path=Path(text[5:]))
    rest = text[4:] if text.startswith("tcp:") else text
    if "/" in rest or ":" not in rest:
        if text.startswith("tcp:"):
            raise ValueError(f"agent address {text!r}: expected tcp:HOST:PORT")
        return AgentAddress(path=Path(text))
    host, _, port_s = rest.rpartition(":")
    host = host.strip("[]")
    try:
        port = int(port_s)
    except ValueError:
        raise ValueError(f"agent address {text!r}: port {port_s!r} is not a number") from None
    if not 0 <= port <= 0xFFFF or not host:
        raise ValueError(f"agent address {text!r}: expected HOST:PORT with a port 0..65535")
    return AgentAddress(host=host, port=port)


def agent_socket_for(api_socket: str | Path) -> Path:
    """The agent socket that goes with an API socket: same folder (and so the same
    permissions), ``NAME-agents.sock``."""
    p = Path(api_socket)
    stem = p.name[: -len(".sock")] if p.name.endswith(".sock") else p.name
    return p.with_name(f"{stem}-agents.sock")


def _depth(obj: Any) -> int:
    """Nesting depth of decoded JSON (iterative: a hostile frame cannot blow the stack)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        item, d = stack.pop()
        if isinstance(item, dict):
            deepest = max(deepest, d)
            if d <= MAX_DEPTH:
                stack.extend((v, d + 1) for v in item.values())
        elif isinstance(item, list):
            deepest = max(deepest, d)
            if d <= MAX_DEPTH:
                stack.extend((v, d + 1) for v in item)
    return deepest


def _name(data: Mapping[str, Any], key: str, where: str, *, allow_empty: bool = False) -> str:
    v = data.get(key)
    lo = 0 if allow_empty else 1
    if not isinstance(v, str) or len(v) < lo or len(v) > MAX_NAME or not v.isprintable():
        raise ProtocolError(
            f"{where}.{key}: expected a printable string of {lo}..{MAX_NAME} characters, got "
            f"{_short(v)}"
        )
    return v


def _int(
    data: Mapping[str, Any], key: str, where: str, lo: int, hi: int, *, default: int | None = None
) -> int:
    v = data.get(key, default)
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
        raise ProtocolError(f"{where}.{key}: expected an integer {lo}..{hi}, got {_short(v)}")
    return v


def _rate(v: Any, where: str) -> float:
    if not isinstance(v, int | float) or isinstance(v, bool) or not math.isfinite(v) or v < 0:
        raise ProtocolError(f"{where}: expected a finite rate >= 0 in bit/s, got {_short(v)}")
    return float(v)


def _ipv4(data: Mapping[str, Any], key: str, where: str) -> str:
    v = data.get(key)
    if not isinstance(v, str) or len(v) > 15:
        raise ProtocolError(f"{where}.{key}: expected an IPv4 address, got {_short(v)}")
    try:
        return str(ipaddress.IPv4Address(v))
    except ValueError:
        raise ProtocolError(f"{where}.{key}: expected an IPv4 address, got {_short(v)}") from None


def _list(data: Mapping[str, Any], key: str, where: str) -> list[Any]:
    v = data.get(key)
    if not isinstance(v, list):
        raise ProtocolError(f"{where}.{key}: expected a list, got {_short(v)}")
    if len(v) > MAX_FLOWS_PER_FRAME:
        raise ProtocolError(f"{where}.{key}: {len(v)} items, at most {MAX_FLOWS_PER_FRAME}")
    return v


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."
