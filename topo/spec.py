"""Topology spec: switches, hosts and links as data, loaded from and saved to YAML/JSON.

One spec file drives both Mininet and the controller (see topo/README.md for the format).
Loading validates everything and reports every problem with the file, the key and what was
expected, e.g. ``topo/examples/x.yaml: links[3].a.port: port 2 of leaf1 is already used by
links[1]``.

Limits every later stage relies on are checked here (see topo/README.md): file size, UTF-8,
nesting and duplicate keys; at most ``MAX_SWITCHES`` switches, ``MAX_HOSTS`` hosts and
``MAX_LINKS`` links; names of at most ``MAX_NAME_LEN`` characters; switch ids below 2^24 (the
router MAC holds 24 bits); ports 1..510 except the CPU port 255; finite rates and delays; host
addresses that are unicast hosts of a /8../30 subnet and unicast MACs other than router MACs.
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from icefabric.files import (  # re-exported: the readers of job and experiment files use them
    DataFileError,
    printable,
    read_data_file,
    write_output,
)
from icefabric.p4src.ice_p4 import CPU_PORT  # ice-switch/BMv2 --cpu-port: no host or link on it

SWITCH_ROLES = ("leaf", "spine", "core", "tor", "agg")
# Tier of each role in the Clos: hosts attach to tier 0, paths go up then down.
ROLE_TIER = {"leaf": 0, "tor": 0, "spine": 1, "agg": 1, "core": 2}
HOST_ROLES = ("leaf", "tor")
_MAC_RE = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")
_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")
THRIFT_BASE_PORT = 9090  # BMv2 simple_switch_CLI default; switch i of a spec gets 9090 + i
MAX_SWITCHES = 16_384  # the 100k-GPU fat-tree(38) has 1,805
MAX_HOSTS = 131_072  # ... and 12,996 hosts
MAX_LINKS = 262_144
MAX_NAME_LEN = 64  # LLDP carries the switch name in a 255-byte chassis id; logs and tables
MAX_SWITCH_ID = (1 << 24) - 1  # the router MAC is 02:1c:e0 + 24 bits of switch id
MAX_PORT = 510
ROUTER_MAC_PREFIX = "02:1c:e0:"


# One error type for every data file (topology, job, experiment, results): see icefabric.files.
SpecError = DataFileError


@dataclass(slots=True, frozen=True, kw_only=True)
class Defaults:
    """Values used where a switch, host or link leaves a field out."""

    link_rate_gbps: float = 100.0
    host_rate_gbps: float = 100.0
    link_delay_us: float = 0.0
    grpc_base_port: int = 50051
    # Egress queues per switch port (BMv2 --priority-queues; simple_switch drops a packet whose
    # priority is >= this): with more than 1 the controller puts control traffic in the top one.
    priority_queues: int = 1


@dataclass(slots=True, frozen=True, kw_only=True)
class Switch:
    """One P4 switch: role in the Clos, P4Runtime device id and gRPC port, INT switch id."""

    name: str
    role: str
    device_id: int
    grpc_port: int
    switch_id: int
    # Tofino: front-panel port -> device (SDK) port, sorted by front-panel port; empty means the
    # spec's port numbers are the device's (BMv2, embedded).  See topo/sdk_ports.py.
    sdk_ports: tuple[tuple[int, int], ...] = ()

    @property
    def tier(self) -> int:
        """Clos tier: 0 for leaf/tor, 1 for spine/agg, 2 for core."""
        return ROLE_TIER[self.role]

    @property
    def grpc_addr(self) -> str:
        """The P4Runtime address on the local machine (Mininet runs switches on loopback)."""
        return f"127.0.0.1:{self.grpc_port}"


@dataclass(slots=True, frozen=True, kw_only=True)
class Host:
    """One host (a RoCEv2 NIC) attached to one leaf port."""

    name: str
    ip: str  # address with prefix length, e.g. 10.0.1.1/24
    mac: str
    leaf: str
    port: int
    rate_gbps: float | None = None  # None: defaults.host_rate_gbps

    @property
    def address(self) -> str:
        """The IPv4 address without the prefix length."""
        return self.ip.split("/", 1)[0]


@dataclass(slots=True, frozen=True, kw_only=True)
class Endpoint:
    """One end of a switch-to-switch link."""

    node: str
    port: int


@dataclass(slots=True, frozen=True, kw_only=True)
class Link:
    """A full-duplex switch-to-switch link."""

    a: Endpoint
    b: Endpoint
    rate_gbps: float | None = None  # None: defaults.link_rate_gbps
    delay_us: float | None = None  # None: defaults.link_delay_us


@dataclass(slots=True, frozen=True, kw_only=True)
class TopologySpec:
    """A whole fabric: switches, hosts attached to leaves, links between switches."""

    name: str
    switches: tuple[Switch, ...]
    hosts: tuple[Host, ...]
    links: tuple[Link, ...]
    defaults: Defaults = field(default_factory=Defaults)

    def thrift_port(self, name: str) -> int:
        """BMv2's thrift port (``simple_switch_CLI``) of switch ``name``: one per switch,
        ``THRIFT_BASE_PORT`` + its index in the spec, as p4-utils numbers them. Mininet starts
        each BMv2 switch in a network namespace of its own, so it is reachable only there."""
        for i, s in enumerate(self.switches):
            if s.name == name:
                return THRIFT_BASE_PORT + i
        raise KeyError(name)

    def switch(self, name: str) -> Switch:
        """The switch called ``name`` (KeyError if none)."""
        for s in self.switches:
            if s.name == name:
                return s
        raise KeyError(name)

    def host(self, name: str) -> Host:
        """The host called ``name`` (KeyError if none)."""
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    def link_rate(self, link: Link) -> float:
        """The rate of ``link`` in Gbit/s, defaults applied."""
        return link.rate_gbps if link.rate_gbps is not None else self.defaults.link_rate_gbps

    def link_delay(self, link: Link) -> float:
        """The one-way delay of ``link`` in microseconds, defaults applied."""
        return link.delay_us if link.delay_us is not None else self.defaults.link_delay_us

    def host_rate(self, host: Host) -> float:
        """The rate of ``host``'s access link in Gbit/s, defaults applied."""
        return host.rate_gbps if host.rate_gbps is not None else self.defaults.host_rate_gbps

    def to_dict(self) -> dict[str, Any]:
        """The spec as plain data (the file format of topo/README.md)."""
        d = self.defaults
        out: dict[str, Any] = {
            "name": self.name,
            "defaults": {
                "link_rate_gbps": d.link_rate_gbps,
                "host_rate_gbps": d.host_rate_gbps,
                "link_delay_us": d.link_delay_us,
                "grpc_base_port": d.grpc_base_port,
                "priority_queues": d.priority_queues,
            },
            "switches": [],
            "hosts": [],
            "links": [],
        }
        for s in self.switches:
            sd: dict[str, Any] = {
                "name": s.name,
                "role": s.role,
                "device_id": s.device_id,
                "grpc_port": s.grpc_port,
                "switch_id": s.switch_id,
            }
            if s.sdk_ports:
                sd["sdk_ports"] = dict(s.sdk_ports)
            out["switches"].append(sd)
        for h in self.hosts:
            hd: dict[str, Any] = {
                "name": h.name,
                "ip": h.ip,
                "mac": h.mac,
                "leaf": h.leaf,
                "port": h.port,
            }
            if h.rate_gbps is not None:
                hd["rate_gbps"] = h.rate_gbps
            out["hosts"].append(hd)
        for ln in self.links:
            ld: dict[str, Any] = {
                "a": {"node": ln.a.node, "port": ln.a.port},
                "b": {"node": ln.b.node, "port": ln.b.port},
            }
            if ln.rate_gbps is not None:
                ld["rate_gbps"] = ln.rate_gbps
            if ln.delay_us is not None:
                ld["delay_us"] = ln.delay_us
            out["links"].append(ld)
        return out


# --------------------------------------------------------------------------- loading


class _Reader:
    """Typed field access that records errors as ``source: key: message``."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.errors: list[str] = []

    def err(self, key: str, msg: str) -> None:
        self.errors.append(printable(f"{self.source}: {key}: {msg}"))

    def mapping(self, value: Any, key: str) -> Mapping[str, Any] | None:
        if not isinstance(value, Mapping):
            self.err(key, f"expected a mapping, got {_kind(value)}")
            return None
        return value

    def unknown(self, m: Mapping[str, Any], key: str, allowed: Iterable[str]) -> None:
        allowed_set = set(allowed)
        for k in m:
            if k not in allowed_set:
                self.err(
                    f"{key}.{k}" if key else str(k),
                    f"unknown key (expected one of {', '.join(sorted(allowed_set))})",
                )

    def string(self, m: Mapping[str, Any], k: str, key: str, default: str | None = None) -> str:
        v = m.get(k, default)
        if v is None:
            self.err(_join(key, k), "missing (expected a string)")
            return ""
        if not isinstance(v, str) or not v:
            self.err(_join(key, k), f"expected a non-empty string, got {_kind(v)}")
            return ""
        return v

    def integer(
        self,
        m: Mapping[str, Any],
        k: str,
        key: str,
        *,
        lo: int,
        hi: int,
        default: int | None = None,
    ) -> int:
        v = m.get(k, default)
        if v is None:
            self.err(_join(key, k), f"missing (expected an integer {lo}..{hi})")
            return -1
        if isinstance(v, bool) or not isinstance(v, int):
            self.err(_join(key, k), f"expected an integer {lo}..{hi}, got {_kind(v)}")
            return -1
        if not lo <= v <= hi:
            self.err(_join(key, k), f"expected an integer {lo}..{hi}, got {v}")
            return -1
        return v

    def number(
        self, m: Mapping[str, Any], k: str, key: str, *, positive: bool, default: float | None
    ) -> float | None:
        v = m.get(k, default)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int | float):
            self.err(_join(key, k), f"expected a number, got {_kind(v)}")
            return None
        if isinstance(v, float) and not math.isfinite(v):
            self.err(_join(key, k), f"expected a finite number, got {v}")
            return None
        if abs(v) > 1e12:
            self.err(_join(key, k), f"expected a number below 1e12, got {v:g}")
            return None
        if positive and not v > 0:
            self.err(_join(key, k), f"expected a positive number, got {v}")
            return None
        if not positive and v < 0:
            self.err(_join(key, k), f"expected a number >= 0, got {v}")
            return None
        return float(v)

    def seq(self, m: Mapping[str, Any], k: str, key: str, limit: int | None = None) -> list[Any]:
        v = m.get(k, [])
        if not isinstance(v, list):
            self.err(_join(key, k), f"expected a list, got {_kind(v)}")
            return []
        if limit is not None and len(v) > limit:
            self.err(_join(key, k), f"expected at most {limit} entries, got {len(v)}")
            return []
        return v

    def name(self, m: Mapping[str, Any], key: str) -> str:
        """A switch or host name: letters, digits, '_', '-', '.', at most MAX_NAME_LEN."""
        name = self.string(m, "name", key)
        if name and (len(name) > MAX_NAME_LEN or not _NAME_RE.match(name)):
            shown = name if len(name) <= 40 else name[:37] + "..."
            self.err(
                f"{key}.name",
                f"expected 1..{MAX_NAME_LEN} letters, digits, '_', '-', '.' starting with a "
                f"letter, got {shown!r} ({len(name)} characters)",
            )
            return ""
        return name

    def port(self, m: Mapping[str, Any], key: str) -> int:
        """A front-panel port 1..MAX_PORT other than the CPU port."""
        port = self.integer(m, "port", key, lo=1, hi=MAX_PORT)
        if port == CPU_PORT:
            self.err(
                f"{key}.port", f"port {CPU_PORT} is the switches' CPU port (use 1..{MAX_PORT})"
            )
            return -1
        return port


def _join(key: str, k: str) -> str:
    return f"{key}.{k}" if key else k


def _kind(v: Any) -> str:
    if v is None:
        return "nothing"
    if isinstance(v, str):
        return f"string {v!r}" if len(v) <= 40 else f"string {v[:37]!r}..."
    if isinstance(v, bool):
        return f"boolean {v}"
    if isinstance(v, int | float):
        return f"number {v}"
    return type(v).__name__


def load_topology(path: str | Path, *, referenced_from: str | Path | None = None) -> TopologySpec:
    """Load and validate a topology spec from a YAML or JSON file (``referenced_from``: the
    file that named it, whose owner must be able to read it too)."""
    data, source = read_data_file(path, what="a topology file", referenced_from=referenced_from)
    return parse_topology(data, source=source)


def save_topology(spec: TopologySpec, path: str | Path) -> None:
    """Write ``spec`` as JSON (``.json``) or YAML (anything else), never through a symlink or
    over another user's file (:func:`icefabric.files.write_output`)."""
    p = Path(path)
    data = spec.to_dict()
    if p.suffix.lower() == ".json":
        write_output(p, json.dumps(data, indent=2) + "\n")
    else:
        write_output(p, yaml.safe_dump(data, sort_keys=False, default_flow_style=None))


def parse_topology(data: Any, source: str = "<topology>") -> TopologySpec:
    """Validate plain data (a parsed spec file) and build a TopologySpec; SpecError lists problems."""
    r = _Reader(source)
    top = r.mapping(data, "(top level)")
    if top is None:
        raise SpecError(r.errors)
    r.unknown(top, "", ("name", "defaults", "switches", "hosts", "links"))
    name = r.string(top, "name", "")
    defaults = _parse_defaults(r, top.get("defaults", {}))
    switches = _parse_switches(r, r.seq(top, "switches", "", MAX_SWITCHES), defaults)
    by_name = {s.name: s for s in switches}
    hosts = _parse_hosts(r, r.seq(top, "hosts", "", MAX_HOSTS), by_name)
    links = _parse_links(r, r.seq(top, "links", "", MAX_LINKS), by_name, {h.name for h in hosts})
    _check_ports(r, hosts, links)
    _check_sdk_ports(r, switches, hosts, links)
    if not switches:
        r.err("switches", "expected at least one switch")
    if not r.errors:
        _check_connected(r, switches, links)
    if r.errors:
        raise SpecError(r.errors)
    return TopologySpec(
        name=name,
        switches=tuple(switches),
        hosts=tuple(hosts),
        links=tuple(links),
        defaults=defaults,
    )


def _parse_defaults(r: _Reader, raw: Any) -> Defaults:
    m = r.mapping(raw if raw is not None else {}, "defaults")
    if m is None:
        return Defaults()
    r.unknown(
        m,
        "defaults",
        ("link_rate_gbps", "host_rate_gbps", "link_delay_us", "grpc_base_port", "priority_queues"),
    )
    base = Defaults()
    lr = r.number(m, "link_rate_gbps", "defaults", positive=True, default=base.link_rate_gbps)
    hr = r.number(m, "host_rate_gbps", "defaults", positive=True, default=base.host_rate_gbps)
    dl = r.number(m, "link_delay_us", "defaults", positive=False, default=base.link_delay_us)
    gp = r.integer(m, "grpc_base_port", "defaults", lo=1, hi=65535, default=base.grpc_base_port)
    pq = r.integer(m, "priority_queues", "defaults", lo=1, hi=8, default=base.priority_queues)
    return Defaults(
        link_rate_gbps=lr or base.link_rate_gbps,
        host_rate_gbps=hr or base.host_rate_gbps,
        link_delay_us=dl if dl is not None else base.link_delay_us,
        grpc_base_port=gp if gp > 0 else base.grpc_base_port,
        priority_queues=pq if pq > 0 else base.priority_queues,
    )


def _first_use(r: _Reader, seen: dict[Any, str], value: Any, key: str, what: str) -> None:
    if value in seen:
        r.err(key, f"{what} {value!r} is already used by {seen[value]}")
    else:
        seen[value] = key.rsplit(".", 1)[0]


def _parse_switches(r: _Reader, raw: list[Any], defaults: Defaults) -> list[Switch]:
    out: list[Switch] = []
    names: dict[Any, str] = {}
    dev_ids: dict[Any, str] = {}
    ports: dict[Any, str] = {}
    sw_ids: dict[Any, str] = {}
    for i, item in enumerate(raw):
        key = f"switches[{i}]"
        m = r.mapping(item, key)
        if m is None:
            continue
        r.unknown(m, key, ("name", "role", "device_id", "grpc_port", "switch_id", "sdk_ports"))
        name = r.name(m, key)
        role = r.string(m, "role", key)
        if role and role not in SWITCH_ROLES:
            r.err(f"{key}.role", f"expected one of {', '.join(SWITCH_ROLES)}, got {role!r}")
        dev = r.integer(m, "device_id", key, lo=0, hi=2**64 - 1, default=i + 1)
        port = r.integer(
            m, "grpc_port", key, lo=1, hi=65535, default=min(defaults.grpc_base_port + i, 65535)
        )
        swid = r.integer(
            m, "switch_id", key, lo=0, hi=MAX_SWITCH_ID, default=dev if dev >= 0 else i + 1
        )
        if name:
            _first_use(r, names, name, f"{key}.name", "name")
        if dev >= 0:
            _first_use(r, dev_ids, dev, f"{key}.device_id", "device_id")
        if port > 0:
            _first_use(r, ports, port, f"{key}.grpc_port", "grpc port")
        if swid >= 0:
            _first_use(r, sw_ids, swid, f"{key}.switch_id", "switch_id")
        sdk = _parse_sdk_ports(r, m.get("sdk_ports"), f"{key}.sdk_ports")
        out.append(
            Switch(
                name=name,
                role=role,
                device_id=dev,
                grpc_port=port,
                switch_id=swid,
                sdk_ports=sdk,
            )
        )
    return out


# Tofino device ports are 9 bits wide.
MAX_SDK_PORT = 511


def _parse_sdk_ports(r: _Reader, raw: Any, key: str) -> tuple[tuple[int, int], ...]:
    """`sdk_ports: {front-panel port: device port}`; both integers, device ports unique."""
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        r.err(key, f"expected a mapping of front-panel port to device port, got {raw!r}")
        return ()
    out: dict[int, int] = {}
    seen: dict[int, int] = {}
    for fp, dp in raw.items():
        ok = True
        for what, v in (("front-panel port", fp), ("device port", dp)):
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= MAX_SDK_PORT:
                r.err(f"{key}.{fp}", f"expected a {what} 0..{MAX_SDK_PORT}, got {v!r}")
                ok = False
        if not ok:
            continue
        if dp in seen:
            r.err(f"{key}.{fp}", f"device port {dp} is already the port of front-panel {seen[dp]}")
            continue
        seen[dp] = fp
        out[fp] = dp
    return tuple(sorted(out.items()))


def _parse_hosts(r: _Reader, raw: list[Any], switches: Mapping[str, Switch]) -> list[Host]:
    out: list[Host] = []
    names: dict[Any, str] = {n: "switches" for n in switches}
    ips: dict[Any, str] = {}
    macs: dict[Any, str] = {}
    for i, item in enumerate(raw):
        key = f"hosts[{i}]"
        m = r.mapping(item, key)
        if m is None:
            continue
        r.unknown(m, key, ("name", "ip", "mac", "leaf", "port", "rate_gbps"))
        name = r.name(m, key)
        ip = r.string(m, "ip", key)
        if ip:
            try:
                iface = ipaddress.IPv4Interface(ip)
                if "/" not in ip:
                    r.err(
                        f"{key}.ip",
                        f"expected an IPv4 address with prefix (10.0.1.1/24), got {ip!r}",
                    )
                else:
                    problem = _host_ip_problem(iface)
                    if problem:
                        r.err(f"{key}.ip", f"{problem}, got {ip!r}")
                _first_use(r, ips, str(iface.ip), f"{key}.ip", "address")
            except ValueError:
                r.err(
                    f"{key}.ip",
                    f"expected an IPv4 address with prefix (10.0.1.1/24), got {ip[:40]!r}",
                )
        raw_mac = m.get("mac")
        if isinstance(raw_mac, int) and not isinstance(raw_mac, bool):
            r.err(f"{key}.mac", f"expected a MAC string, YAML read a number ({raw_mac}): quote it")
            mac = ""
        else:
            mac = r.string(m, "mac", key)
        if mac:
            if not _MAC_RE.match(mac):
                r.err(f"{key}.mac", f"expected a MAC like 00:00:0a:00:01:01, got {mac[:40]!r}")
            elif _host_mac_problem(mac):
                r.err(f"{key}.mac", f"{_host_mac_problem(mac)}, got {mac!r}")
            else:
                _first_use(r, macs, mac.lower(), f"{key}.mac", "MAC")
        leaf = r.string(m, "leaf", key)
        if leaf:
            sw = switches.get(leaf)
            if sw is None:
                r.err(f"{key}.leaf", f"expected the name of a leaf/tor switch, no switch {leaf!r}")
            elif sw.role in SWITCH_ROLES and sw.role not in HOST_ROLES:
                r.err(f"{key}.leaf", f"hosts attach to a leaf or tor, {leaf!r} is a {sw.role}")
        port = r.port(m, key)
        rate = r.number(m, "rate_gbps", key, positive=True, default=None)
        if name:
            _first_use(r, names, name, f"{key}.name", "name")
        out.append(Host(name=name, ip=ip, mac=mac, leaf=leaf, port=port, rate_gbps=rate))
    return out


def _parse_endpoint(
    r: _Reader, raw: Any, key: str, switches: Mapping[str, Switch], hosts: set[str]
) -> Endpoint:
    m = r.mapping(raw, key)
    if m is None:
        return Endpoint(node="", port=-1)
    r.unknown(m, key, ("node", "port"))
    node = r.string(m, "node", key)
    if node and node not in switches:
        if node in hosts:
            r.err(f"{key}.node", f"{node!r} is a host: hosts attach via hosts[].leaf/port")
        else:
            r.err(f"{key}.node", f"expected the name of a switch, no switch {node!r}")
    port = r.port(m, key)
    return Endpoint(node=node, port=port)


def _parse_links(
    r: _Reader, raw: list[Any], switches: Mapping[str, Switch], hosts: set[str]
) -> list[Link]:
    out: list[Link] = []
    for i, item in enumerate(raw):
        key = f"links[{i}]"
        m = r.mapping(item, key)
        if m is None:
            continue
        r.unknown(m, key, ("a", "b", "rate_gbps", "delay_us"))
        a = _parse_endpoint(r, m.get("a"), f"{key}.a", switches, hosts)
        b = _parse_endpoint(r, m.get("b"), f"{key}.b", switches, hosts)
        if a.node and a.node == b.node:
            r.err(f"{key}.b.node", f"a link joins two different switches, both ends are {a.node!r}")
        rate = r.number(m, "rate_gbps", key, positive=True, default=None)
        delay = r.number(m, "delay_us", key, positive=False, default=None)
        out.append(Link(a=a, b=b, rate_gbps=rate, delay_us=delay))
    return out


def _host_ip_problem(iface: ipaddress.IPv4Interface) -> str:
    """Why ``iface`` is no host address ("" when it is one)."""
    net, ip = iface.network, iface.ip
    if not 8 <= net.prefixlen <= 30:
        return f"expected a subnet prefix /8 .. /30, not /{net.prefixlen}"
    if ip.is_multicast or ip.is_unspecified or ip.is_loopback or ip.is_reserved:
        return "expected a unicast host address (not multicast, 0.0.0.0, loopback or reserved)"
    if ip == net.network_address or ip == net.broadcast_address:
        return f"expected a host of {net}, not its network or broadcast address"
    return ""


def _host_mac_problem(mac: str) -> str:
    """Why ``mac`` is no host MAC ("" when it is one)."""
    low = mac.lower()
    if int(low[:2], 16) & 1:
        return "expected a unicast MAC (the first octet even), not a multicast or broadcast one"
    if low == "00:00:00:00:00:00":
        return "expected a MAC other than 00:00:00:00:00:00"
    if low.startswith(ROUTER_MAC_PREFIX):
        return f"expected a MAC outside {ROUTER_MAC_PREFIX}xx:xx:xx (the switches' router MACs)"
    return ""


def _check_connected(r: _Reader, switches: list[Switch], links: list[Link]) -> None:
    parent = {s.name: s.name for s in switches}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for ln in links:
        parent[find(ln.a.node)] = find(ln.b.node)
    root = find(switches[0].name)
    for i, s in enumerate(switches):
        if find(s.name) != root:
            r.err(
                f"switches[{i}]",
                f"{s.name} is not connected to {switches[0].name} (expected links joining every switch)",
            )


def _check_sdk_ports(
    r: _Reader, switches: list[Switch], hosts: list[Host], links: list[Link]
) -> None:
    """A switch with sdk_ports must map every port the topology uses on it."""
    maps = {s.name: dict(s.sdk_ports) for s in switches if s.sdk_ports}
    index = {s.name: i for i, s in enumerate(switches)}
    used: list[tuple[str, int, str]] = [(h.leaf, h.port, f"host {h.name}") for h in hosts]
    for ln in links:
        used.append((ln.a.node, ln.a.port, f"link to {ln.b.node}"))
        used.append((ln.b.node, ln.b.port, f"link to {ln.a.node}"))
    for node, port, what in used:
        if node in maps and port not in maps[node]:
            r.err(
                f"switches[{index[node]}].sdk_ports",
                f"no device port for front-panel port {port} ({what})",
            )


def _check_ports(r: _Reader, hosts: list[Host], links: list[Link]) -> None:
    used: dict[tuple[str, int], str] = {}
    for i, h in enumerate(hosts):
        if h.leaf and h.port > 0:
            k = (h.leaf, h.port)
            if k in used:
                r.err(f"hosts[{i}].port", f"port {h.port} of {h.leaf} is already used by {used[k]}")
            else:
                used[k] = f"hosts[{i}]"
    for i, ln in enumerate(links):
        for side, ep in (("a", ln.a), ("b", ln.b)):
            if not ep.node or ep.port <= 0:
                continue
            k = (ep.node, ep.port)
            if k in used:
                r.err(
                    f"links[{i}].{side}.port",
                    f"port {ep.port} of {ep.node} is already used by {used[k]}",
                )
            else:
                used[k] = f"links[{i}]"
