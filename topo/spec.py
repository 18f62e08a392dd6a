"""Topology spec: switches, hosts and links as data, loaded from and saved to YAML/JSON.

One spec file drives both Mininet and the controller (see topo/README.md for the format). The
data model (``TopologySpec`` and its parts, the limits) is ``topo/model.py``, re-exported here.
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
from icefabric.topo.model import (  # re-exported: the spec's data model lives in topo/model.py
    HOST_ROLES,
    MAX_HOSTS,
    MAX_LINKS,
    MAX_NAME_LEN,
    MAX_PORT,
    MAX_SWITCH_ID,
    MAX_SWITCHES,
    ROLE_TIER,
    ROUTER_MAC_PREFIX,
    SWITCH_ROLES,
    THRIFT_BASE_PORT,
    Defaults,
    Endpoint,
    Host,
    Link,
    Switch,
    TopologySpec,
)

_MAC_RE = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")
_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")

# One error type for every data file (topology, job, experiment, results): see icefabric.files.
SpecError = DataFileError

__all__ = [
    "HOST_ROLES",
    "MAX_HOSTS",
    "MAX_LINKS",
    "MAX_NAME_LEN",
    "MAX_PORT",
    "MAX_SWITCHES",
    "MAX_SWITCH_ID",
    "ROLE_TIER",
    "ROUTER_MAC_PREFIX",
    "SWITCH_ROLES",
    "THRIFT_BASE_PORT",
    "DataFileError",
    "Defaults",
    "Endpoint",
    "Host",
    "Link",
    "SpecError",
    "Switch",
    "TopologySpec",
    "load_topology",
    "parse_topology",
    "printable",
    "read_data_file",
    "save_topology",
    "write_output",
]


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
