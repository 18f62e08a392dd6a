"""Tofino port numbering: a spec's front-panel ports as the device (SDK) ports the switch uses.

On Tofino the port numbers in table entries, clone sessions, packet-in/packet-out metadata and
INT records are device ports (``D_P``), not the front-panel numbers an operator cables by.  A
switch in the topology spec may carry ``sdk_ports: {front-panel: device port}``;
:func:`to_device_ports` returns the spec with every host and link port of such switches replaced
by its device port, so everything the controller derives from it (base forwarding, plans, probes,
telemetry names) uses device ports, and nothing else needs to know.
"""

from __future__ import annotations

from dataclasses import replace

from icefabric.topo.spec import Endpoint, TopologySpec


class SdkPortError(ValueError):
    """A port used by the topology is missing from its switch's sdk_ports map."""


def to_device_ports(spec: TopologySpec) -> TopologySpec:
    """The spec with every port of a switch that has ``sdk_ports`` mapped to its device port."""
    maps = {s.name: dict(s.sdk_ports) for s in spec.switches if s.sdk_ports}
    if not maps:
        return spec
    missing: list[str] = []

    def dev(node: str, port: int, what: str) -> int:
        m = maps.get(node)
        if m is None:
            return port
        if port not in m:
            missing.append(f"{node} port {port} ({what})")
            return port
        return m[port]

    hosts = tuple(replace(h, port=dev(h.leaf, h.port, f"host {h.name}")) for h in spec.hosts)
    links = tuple(
        replace(
            ln,
            a=Endpoint(node=ln.a.node, port=dev(ln.a.node, ln.a.port, f"link to {ln.b.node}")),
            b=Endpoint(node=ln.b.node, port=dev(ln.b.node, ln.b.port, f"link to {ln.a.node}")),
        )
        for ln in spec.links
    )
    if missing:
        raise SdkPortError(
            f"topology {spec.name}: sdk_ports has no device port for "
            + ", ".join(missing)
            + " (every port a switch with sdk_ports uses must be in its map)"
        )
    return replace(spec, hosts=hosts, links=links)
