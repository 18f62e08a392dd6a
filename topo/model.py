"""The topology spec as data: switches, hosts, links and their defaults (``TopologySpec``), and
the limits every later stage relies on. Loading, validating and saving spec files is
``topo/spec.py``; the format is in topo/README.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SWITCH_ROLES = ("leaf", "spine", "core", "tor", "agg")
# Tier of each role in the Clos: hosts attach to tier 0, paths go up then down.
ROLE_TIER = {"leaf": 0, "tor": 0, "spine": 1, "agg": 1, "core": 2}
HOST_ROLES = ("leaf", "tor")
THRIFT_BASE_PORT = 9090  # BMv2 simple_switch_CLI default; switch i of a spec gets 9090 + i
# P4Runtime's IANA port (simple_switch_grpc's and ice-switch's default): switch i gets 9559 + i.
# Below Linux's ephemeral range (32768-60999 by default), where any outgoing connection may take
# a port first (50051 + i, the gRPC examples' port, collided that way once).
P4RUNTIME_BASE_PORT = 9559
MAX_SWITCHES = 16_384  # the 100k-GPU fat-tree(38) has 1,805
MAX_HOSTS = 131_072  # ... and 12,996 hosts
MAX_LINKS = 262_144
MAX_NAME_LEN = 64  # LLDP carries the switch name in a 255-byte chassis id; logs and tables
MAX_SWITCH_ID = (1 << 24) - 1  # the router MAC is 02:1c:e0 + 24 bits of switch id
MAX_PORT = 510
ROUTER_MAC_PREFIX = "02:1c:e0:"


@dataclass(slots=True, frozen=True, kw_only=True)
class Defaults:
    """Values used where a switch, host or link leaves a field out."""

    link_rate_gbps: float = 100.0
    host_rate_gbps: float = 100.0
    link_delay_us: float = 0.0
    grpc_base_port: int = P4RUNTIME_BASE_PORT
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

    def interleaved_hosts(self) -> list[str]:
        """Host names ordered so that ring neighbours sit on different leaves: the first host
        of every leaf, then the second of every leaf, ... (all ring traffic crosses the
        spines)."""
        leaves = list(dict.fromkeys(h.leaf for h in self.hosts))
        per_leaf = [[h.name for h in self.hosts if h.leaf == leaf] for leaf in leaves]
        out: list[str] = []
        for i in range(max((len(x) for x in per_leaf), default=0)):
            out.extend(x[i] for x in per_leaf if i < len(x))
        return out

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
