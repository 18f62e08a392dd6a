"""``icefabric-host``'s options resolved: addresses, pace and work from flags and the topology.

Inside a Mininet host the interface is the namespace's only one, the host is the topology's
host whose address the interface holds and the pace follows the switch target
(:data:`TARGET_PACE_BPS`); bad options raise :class:`UsageError` (exit code 2, one line).
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from icefabric.traffic.roce import ip_bytes, mac_bytes

MAX_SCHEDULE_BYTES = 64 << 20
SIOCGIFADDR = 0x8915
# The default pace (bit/s) per switch target when --line-rate and --rate-scale are not given:
# what its Mininet fabric forwards with no loss on the shared 2-core machine (the README's
# tour, tests/e2e/test_readme_tour.py: 1 MB, 0 lost). Python's ice-switch forwards a few
# thousand packets/s per process; BMv2's simple_switch_grpc more on an idle host, but at load
# 10 on the 2-core machine the tour's receiver got 851 packets in 1.09 s (6.4 Mbit/s) from a
# 20 Mbit/s sender and the last 126 never arrived (ICE_TARGET=bmv2 pytest
# tests/e2e/test_readme_tour.py), so BMv2 is paced as ice-switch is.
TARGET_PACE_BPS = {"embedded": 5e6, "bmv2": 5e6}
DEFAULT_PACE_BPS = 5e6  # no topology and no target known


class UsageError(ValueError):
    """A bad option or input file (exit code 2, one line)."""


def parse_rate(text: str) -> float:
    """``100M`` / ``2.5G`` / ``1e9`` -> bit/s."""
    t = text.strip()
    mult = {"K": 1e3, "M": 1e6, "G": 1e9}.get(t[-1:].upper(), 1.0)
    if mult != 1.0:
        t = t[:-1]
    try:
        value = float(t) * mult
    except ValueError:
        raise UsageError(f"rate {text!r}: expected bit/s like 100M, 2.5G or 1e9") from None
    if not value > 0:
        raise UsageError(f"rate {text!r}: must be > 0")
    return value


@dataclass(frozen=True, slots=True)
class FlowArg:
    """``--flow DST_IP:BYTES``."""

    dst_ip: str
    nbytes: int


def parse_flow(text: str) -> FlowArg:
    """Parse ``DST_IP:BYTES``."""
    ip, sep, size = text.rpartition(":")
    try:
        ip_bytes(ip)
        nbytes = int(size)
    except ValueError:
        raise UsageError(f"--flow {text!r}: expected DST_IP:BYTES, e.g. 10.0.2.1:1000000") from None
    if not sep or nbytes <= 0:
        raise UsageError(f"--flow {text!r}: expected DST_IP:BYTES with BYTES > 0")
    return FlowArg(ip, nbytes)


def iface_mac(iface: str) -> str:
    """The MAC address of ``iface`` (from sysfs)."""
    try:
        return Path(f"/sys/class/net/{iface}/address").read_text().strip()
    except OSError:
        raise UsageError(f"--iface {iface}: no such interface in this namespace") from None


def namespace_interfaces() -> list[str]:
    """The interfaces of this network namespace other than loopback, sorted."""
    try:
        names = os.listdir("/sys/class/net")
    except OSError:
        return []
    return sorted(n for n in names if n != "lo" and not n.startswith("bonding_"))


def default_iface() -> str:
    """The namespace's only interface (a Mininet host's ``hN-eth0``); UsageError otherwise."""
    names = namespace_interfaces()
    if len(names) != 1:
        listed = ", ".join(names) or "none"
        raise UsageError(
            f"--iface is needed: this namespace has {len(names)} interfaces ({listed})"
        )
    return names[0]


def iface_ipv4(iface: str) -> str | None:
    """The IPv4 address of ``iface`` (SIOCGIFADDR), None when it has none."""
    import fcntl

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            req = struct.pack("256s", iface.encode()[:15])
            res = fcntl.ioctl(s.fileno(), SIOCGIFADDR, req)
        except OSError:
            return None
    return socket.inet_ntoa(res[20:24])


def default_controller() -> list[str]:
    """The default agent channel when it is there (next to ``icectl run``'s API socket)."""
    from icefabric.control.agents.protocol import agent_socket_for
    from icefabric.control.daemon.paths import default_socket

    api = os.environ.get("ICECTL_SOCKET") or str(default_socket())
    path = agent_socket_for(api)
    return [str(path)] if path.exists() else []


@dataclass(slots=True)
class HostConfig:
    """Resolved options."""

    name: str
    ip: str
    mac: str
    gateway_mac: str
    line_rate_bps: float
    iface: str = ""
    rate_scale: float = 1.0
    rate_note: str = ""  # how the pace was chosen, for the summary line
    host_names: dict[str, str] | None = None  # ip -> host name (topology)
    switch_names: dict[int, str] | None = None  # switch id -> name (topology)


def _find_host(spec: Any, what: str, topology: Path) -> Any:
    """A host of ``spec`` by name or by address."""
    try:
        return spec.host(what)
    except KeyError:
        pass
    for h in spec.hosts:
        if h.address == what:
            return h
    raise UsageError(f"--host {what}: no host of that name or address in {topology}")


def resolve(args: argparse.Namespace) -> HostConfig:
    """Fill the host's addresses and rate from the options and the topology (UsageError)."""
    iface = args.iface or default_iface()
    name, ip, gw, line = args.host, args.ip, args.gateway_mac, None
    scale = args.rate_scale if args.rate_scale is not None else 1.0
    note = ""
    host_names = switch_names = None
    if args.topology is not None:
        from icefabric.control.fabric import switch_mac
        from icefabric.topo.spec import SpecError, load_topology

        try:
            spec = load_topology(args.topology)
        except SpecError as exc:
            raise UsageError(f"{args.topology}: {str(exc).splitlines()[0]}") from None
        except OSError as exc:
            raise UsageError(f"{args.topology}: {exc.strerror}") from None
        if args.host:
            h = _find_host(spec, args.host, args.topology)
        else:
            mine = args.ip or iface_ipv4(iface)
            h = _find_host(spec, mine, args.topology) if mine else None
            if h is None:
                raise UsageError(
                    f"--host is needed: {iface} has no IPv4 address of a host in {args.topology}"
                )
        name = h.name
        ip = ip or h.address
        gw = gw or switch_mac(spec.switch(h.leaf).switch_id)
        topo_bps = spec.host_rate(h) * 1e9
        if args.rate_scale is not None:
            line = topo_bps * scale
        else:
            target = os.environ.get("ICE_TARGET", "embedded")
            pace = TARGET_PACE_BPS.get(target, DEFAULT_PACE_BPS)
            line = min(topo_bps, pace)
            if pace < topo_bps:
                note = f" (paced for {target} switches; --line-rate to change)"
        args.mac = args.mac or h.mac
        host_names = {x.address: x.name for x in spec.hosts}
        switch_names = {s.switch_id: s.name for s in spec.switches}
    elif args.host:
        name = args.host
    if not ip:
        raise UsageError("--ip is required (or --topology with --host)")
    try:
        ip_bytes(ip)
    except ValueError:
        raise UsageError(f"--ip {ip!r}: expected an IPv4 address") from None
    if not gw:
        raise UsageError("--gateway-mac is required (or --topology with --host)")
    for opt, value in (("--gateway-mac", gw), ("--mac", args.mac)):
        if value:
            try:
                mac_bytes(value)
            except ValueError as exc:
                raise UsageError(f"{opt}: {exc}") from None
    if args.line_rate is not None:
        line, note = parse_rate(args.line_rate), ""
    if line is None:
        line, note = DEFAULT_PACE_BPS, ""
    mac = args.mac or iface_mac(iface)
    return HostConfig(
        name=name or iface,
        ip=ip,
        mac=mac,
        gateway_mac=gw,
        line_rate_bps=line,
        iface=iface,
        rate_scale=scale,
        rate_note=note,
        host_names=host_names,
        switch_names=switch_names,
    )


def resolve_flow(text: str, host_names: dict[str, str] | None) -> FlowArg:
    """``--flow DST:BYTES`` where DST is an IP or (with a topology) a host name."""
    dst, sep, size = text.rpartition(":")
    if host_names:
        by_name = {v: k for k, v in host_names.items()}
        if dst in by_name:
            return parse_flow(f"{by_name[dst]}{sep}{size}")
    return parse_flow(text)


def load_schedule(path: Path) -> Any:
    """The schedule file at ``path`` (UsageError naming it when it is not one)."""
    from icefabric.files import DataFileError, JsonError, parse_json, read_input
    from icefabric.traffic.workload import Schedule

    try:
        data = parse_json(read_input(path, limit=MAX_SCHEDULE_BYTES, what="a schedule"))
        return Schedule.from_dict(data)
    except DataFileError as exc:
        raise UsageError(str(exc).splitlines()[0]) from None
    except JsonError as exc:
        raise UsageError(f"{path}: not valid JSON: {exc}") from None
    except ValueError as exc:
        raise UsageError(f"{path}: {str(exc).splitlines()[0]}") from None
