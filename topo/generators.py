"""Generators for the two fabric shapes ICE targets: leaf-spine and the three-tier fat-tree(k).

Addressing (both generators): the hosts under the i-th leaf/ToR (0-based, in generation order)
get ``10.<(i+1) // 256>.<(i+1) % 256>.<h+1>/24`` and MAC ``02:00:00:xx:xx:xx`` numbered from 1;
hosts use leaf ports 1..H, uplinks the ports after them (port numbers skip 255, the CPU port). Switches are numbered leaves first,
then spines (aggs, cores); device_id = switch_id = index + 1, grpc_port = base + index.
Switches get 8 priority queues per port (``priority_queues``), as the launchers start them.
"""

from __future__ import annotations

import ipaddress

from icefabric.p4src.ice_p4 import CPU_PORT
from icefabric.topo.model import P4RUNTIME_BASE_PORT
from icefabric.topo.spec import (
    MAX_HOSTS,
    MAX_PORT,
    MAX_SWITCHES,
    Defaults,
    Endpoint,
    Host,
    Link,
    SpecError,
    Switch,
    TopologySpec,
)

MAX_PORTS = MAX_PORT - 1  # usable ports per switch: 1..510 without the CPU port 255
# fat-tree(k) has 5k^2/4 switches: the largest even k within MAX_SWITCHES
FAT_TREE_MAX_K = max(k for k in range(2, MAX_PORTS + 1, 2) if 5 * k * k // 4 <= MAX_SWITCHES)


def _port(n: int) -> int:
    """The ``n``-th usable switch port (1-based): port numbers skip the CPU port 255."""
    return n if n < CPU_PORT else n + 1


def _host_ip(leaf_index: int, host_index: int) -> str:
    subnet = leaf_index + 1
    if subnet >= 256 * 256 or host_index + 1 > 254:
        raise SpecError(
            [
                f"generator: address plan 10.x.y.z/24 holds 65535 leaves of 254 hosts, got leaf "
                f"{leaf_index + 1}, host {host_index + 1}"
            ]
        )
    return f"10.{subnet // 256}.{subnet % 256}.{host_index + 1}/24"


def _host_mac(n: int) -> str:
    return "02:00:00:" + ":".join(f"{(n >> s) & 0xFF:02x}" for s in (16, 8, 0))


def _switches(names_roles: list[tuple[str, str]], grpc_base_port: int) -> tuple[Switch, ...]:
    if grpc_base_port + len(names_roles) - 1 > 65535:
        raise SpecError(
            [f"generator: {len(names_roles)} switches do not fit gRPC ports from {grpc_base_port}"]
        )
    return tuple(
        Switch(name=n, role=r, device_id=i + 1, grpc_port=grpc_base_port + i, switch_id=i + 1)
        for i, (n, r) in enumerate(names_roles)
    )


def leaf_spine(
    *,
    leaves: int,
    spines: int,
    hosts_per_leaf: int,
    host_rate_gbps: float = 100.0,
    uplink_rate_gbps: float | None = None,
    oversubscription: float = 1.0,
    links_per_spine: int = 1,
    name: str | None = None,
    grpc_base_port: int = P4RUNTIME_BASE_PORT,
    priority_queues: int = 8,
) -> TopologySpec:
    """A two-tier leaf-spine; uplink rate = hosts*host_rate / (spines*links*oversubscription)."""
    errs = []
    for field_name, v in (
        ("leaves", leaves),
        ("spines", spines),
        ("hosts_per_leaf", hosts_per_leaf),
        ("links_per_spine", links_per_spine),
    ):
        if v < 1:
            errs.append(f"generator: leaf_spine.{field_name}: expected >= 1, got {v}")
    if oversubscription <= 0 or host_rate_gbps <= 0:
        errs.append("generator: leaf_spine: oversubscription and host_rate_gbps must be positive")
    if uplink_rate_gbps is not None and uplink_rate_gbps <= 0:
        errs.append(f"generator: leaf_spine.uplink_rate_gbps: expected > 0, got {uplink_rate_gbps}")
    if (
        hosts_per_leaf + spines * links_per_spine > MAX_PORTS
        or leaves * links_per_spine > MAX_PORTS
    ):
        errs.append(f"generator: leaf_spine: more than {MAX_PORTS} ports on one switch")
    if errs:
        raise SpecError(errs)
    if uplink_rate_gbps is None:
        uplink_rate_gbps = (
            hosts_per_leaf * host_rate_gbps / (spines * links_per_spine * oversubscription)
        )
    roles = [(f"leaf{i + 1}", "leaf") for i in range(leaves)]
    roles += [(f"spine{j + 1}", "spine") for j in range(spines)]
    switches = _switches(roles, grpc_base_port)
    hosts = []
    for i in range(leaves):
        for h in range(hosts_per_leaf):
            n = i * hosts_per_leaf + h + 1
            hosts.append(
                Host(
                    name=f"h{n}",
                    ip=_host_ip(i, h),
                    mac=_host_mac(n),
                    leaf=f"leaf{i + 1}",
                    port=_port(h + 1),
                )
            )
    links = []
    for i in range(leaves):
        for j in range(spines):
            for k in range(links_per_spine):
                links.append(
                    Link(
                        a=Endpoint(
                            node=f"leaf{i + 1}",
                            port=_port(hosts_per_leaf + j * links_per_spine + k + 1),
                        ),
                        b=Endpoint(node=f"spine{j + 1}", port=_port(i * links_per_spine + k + 1)),
                    )
                )
    return TopologySpec(
        name=name or f"leaf-spine-{spines}x{leaves}",
        switches=switches,
        hosts=tuple(hosts),
        links=tuple(links),
        defaults=Defaults(
            link_rate_gbps=float(uplink_rate_gbps),
            host_rate_gbps=float(host_rate_gbps),
            grpc_base_port=grpc_base_port,
            priority_queues=priority_queues,
        ),
    )


def fat_tree(
    k: int,
    *,
    rate_gbps: float = 100.0,
    hosts_per_tor: int | None = None,
    name: str | None = None,
    grpc_base_port: int = P4RUNTIME_BASE_PORT,
    priority_queues: int = 8,
) -> TopologySpec:
    """A three-tier fat-tree(k): k pods of k/2 ToRs and k/2 aggs, (k/2)^2 cores, k/2 hosts per ToR.

    ToR t of pod p uses ports 1..H for hosts and H+1..H+k/2 for aggs; agg a of pod p uses ports
    1..k/2 for the ToRs and k/2+1..k for cores a*k/2 .. a*k/2+k/2-1; core c uses port p+1 for pod p.
    """
    if k < 2 or k % 2 or k > FAT_TREE_MAX_K:
        raise SpecError(
            [
                f"generator: fat_tree.k: expected an even integer 2..{FAT_TREE_MAX_K} (5k^2/4 "
                f"switches, at most {MAX_SWITCHES}), got {k}"
            ]
        )
    half = k // 2
    hpt = half if hosts_per_tor is None else hosts_per_tor
    most = min(MAX_PORTS - half, MAX_HOSTS // (k * half))
    if not 1 <= hpt <= most:
        raise SpecError(
            [
                f"generator: fat_tree.hosts_per_tor: expected 1..{most} (ports per switch, "
                f"{MAX_HOSTS} hosts at most), got {hpt}"
            ]
        )
    roles = [(f"tor{p}_{t}", "tor") for p in range(k) for t in range(half)]
    roles += [(f"agg{p}_{a}", "agg") for p in range(k) for a in range(half)]
    roles += [(f"core{c}", "core") for c in range(half * half)]
    switches = _switches(roles, grpc_base_port)
    hosts = []
    links = []
    n = 0
    for p in range(k):
        for t in range(half):
            tor = f"tor{p}_{t}"
            for h in range(hpt):
                n += 1
                hosts.append(
                    Host(
                        name=f"h{n}",
                        ip=_host_ip(p * half + t, h),
                        mac=_host_mac(n),
                        leaf=tor,
                        port=_port(h + 1),
                    )
                )
            for a in range(half):
                links.append(
                    Link(
                        a=Endpoint(node=tor, port=_port(hpt + a + 1)),
                        b=Endpoint(node=f"agg{p}_{a}", port=_port(t + 1)),
                    )
                )
        for a in range(half):
            for c in range(half):
                core = a * half + c
                links.append(
                    Link(
                        a=Endpoint(node=f"agg{p}_{a}", port=_port(half + c + 1)),
                        b=Endpoint(node=f"core{core}", port=_port(p + 1)),
                    )
                )
    return TopologySpec(
        name=name or f"fat-tree-k{k}",
        switches=switches,
        hosts=tuple(hosts),
        links=tuple(links),
        defaults=Defaults(
            link_rate_gbps=rate_gbps,
            host_rate_gbps=rate_gbps,
            grpc_base_port=grpc_base_port,
            priority_queues=priority_queues,
        ),
    )


def oversubscription(spec: TopologySpec, leaf: str) -> float:
    """Host-facing capacity of ``leaf`` divided by its uplink capacity (1.0 = non-blocking)."""
    down = sum(spec.host_rate(h) for h in spec.hosts if h.leaf == leaf)
    up = sum(spec.link_rate(ln) for ln in spec.links if leaf in (ln.a.node, ln.b.node))
    if up == 0:
        return float("inf")
    return float(down / up)


def subnet_of(spec: TopologySpec, leaf: str) -> ipaddress.IPv4Network | None:
    """The /prefix holding the first host of ``leaf`` (None when the leaf has no host)."""
    for h in spec.hosts:
        if h.leaf == leaf:
            return ipaddress.IPv4Interface(h.ip).network
    return None
