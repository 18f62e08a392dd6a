"""What the in-process fabrics share: a topology's port wiring, its embedded switches served over
P4Runtime, cut links and the hosts' inboxes.

Two fabrics relay frames between switches themselves:
:class:`~icefabric.experiment.wire.InProcessFabric` (embedded switches in this process; real
time or virtual time is the transport it is given: :class:`~icefabric.experiment.wire.RealTime`,
or the virtual-time engine :class:`~icefabric.experiment.virtual_fabric.VirtualFabric`) and
``experiment/bmv2_wire.py``'s ``Bmv2WireFabric`` (BMv2 processes, veth pairs relayed by
this process). Each builds its ports from :func:`wiring` (the same order everywhere), cuts links
and restarts switches through :class:`RelayedFabric`, and both share :class:`WireFabric`'s API
(``tests/dataplane/test_fabric_api.py`` checks it).
"""

from __future__ import annotations

import abc
import contextlib
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from icefabric.p4src.ice_p4 import CPU_PORT
from icefabric.topo.model import Host, Link, Switch
from icefabric.topo.spec import TopologySpec
from icefabric.waiting import wait_on


@dataclass(slots=True, frozen=True)
class PortWire:
    """One switch port and what its wire reaches: a peer switch's port, or a host."""

    switch: str
    port: int
    peer: str  # the peer switch, or the host
    peer_port: int  # the peer switch's port; 0 for a host
    link: Link | None = None  # the switch-to-switch link; None on a host port
    host: Host | None = None  # the host on this port; None on a fabric port


def wiring(spec: TopologySpec) -> list[PortWire]:
    """Every switch port of ``spec`` with its wire: the links in spec order, each as its ``a``
    end then its ``b`` end, then the host ports in spec order (every fabric attaches its ports
    in this order, so per-port state is laid out the same in each)."""
    out: list[PortWire] = []
    for ln in spec.links:
        for here, there in ((ln.a, ln.b), (ln.b, ln.a)):
            out.append(PortWire(here.node, here.port, there.node, there.port, link=ln))
    for h in spec.hosts:
        out.append(PortWire(h.leaf, h.port, h.name, 0, host=h))
    return out


def link_ports(spec: TopologySpec, a: str, b: str) -> list[tuple[str, int]]:
    """Both ends (switch, port) of every link between switches a and b."""
    return [
        end
        for ln in spec.links
        if {ln.a.node, ln.b.node} == {a, b}
        for end in ((ln.a.node, ln.a.port), (ln.b.node, ln.b.port))
    ]


class RelayedFabric(abc.ABC):
    """What a fabric that relays frames between its switches itself does the same way whatever
    its switches are: cut and heal links (the ends (switch, port) of every cut link are in
    ``self.cut_ports``, which its wires check for every frame, changed under
    ``self._cut_lock``) and restart a switch (kill it, then revive it)."""

    spec: TopologySpec
    cut_ports: set[tuple[str, int]]
    _cut_lock: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()

    def cut_link(self, a: str, b: str) -> None:
        """Drop everything on the link(s) between switches a and b, both directions."""
        with self._cut_lock:
            self.cut_ports.update(link_ports(self.spec, a, b))

    def heal_link(self, a: str, b: str) -> None:
        """Undo :meth:`cut_link`."""
        with self._cut_lock:
            self.cut_ports.difference_update(link_ports(self.spec, a, b))

    def restart_switch(self, name: str) -> None:
        """Stop a switch and start a fresh one (no pipeline, no entries) on the same address."""
        self.kill_switch(name)
        self.revive_switch(name)

    @abc.abstractmethod
    def kill_switch(self, name: str) -> None:
        """Stop a switch: its P4Runtime server goes away and its links carry nothing."""

    @abc.abstractmethod
    def revive_switch(self, name: str) -> None:
        """Start a fresh switch (no pipeline, no entries) where a killed one was."""


@dataclass(slots=True)
class EmbeddedSwitch:
    """One embedded switch of a fabric and its P4Runtime server."""

    name: str
    device: Any
    server: Any
    port: int  # gRPC port
    service: Any = None


def serve_switch(
    spec: TopologySpec,
    switch: Switch,
    addr: str,
    *,
    clock: Any = None,
    collect_limit: int | None = None,
) -> EmbeddedSwitch:
    """An embedded Device for ``switch`` (its device id, the CPU port, the spec's priority
    queues; ``clock`` None: the wall clock), serving P4Runtime on ``addr``; not started."""
    from icefabric.target.device import Device
    from icefabric.target.server import serve

    device = Device(
        device_id=switch.device_id,
        cpu_port=CPU_PORT,
        clock=clock,
        log=logging.getLogger(f"icefabric.target.device.{switch.name}"),
        priority_queues=spec.defaults.priority_queues,  # as the spec says (Mininet too)
    )
    if collect_limit is not None:
        device.collect_limit = collect_limit
    server, port, service = serve(device, addr)
    return EmbeddedSwitch(
        name=switch.name, device=device, server=server, port=port, service=service
    )


class HostInboxes:
    """Frames delivered to each host of a fabric, in arrival order, and waiting for them.

    ``cond`` guards the frames; a fabric may hold it around its own state too (it is re-entrant).
    """

    def __init__(self, hosts: Iterable[str]) -> None:
        self.cond = threading.Condition()
        self.frames: dict[str, list[bytes]] = {h: [] for h in hosts}

    def deliver(self, host: str, data: bytes) -> None:
        """A frame reached ``host``: keep it and wake the waiters."""
        with self.cond:
            self.frames[host].append(bytes(data))
            self.cond.notify_all()

    def take(self, host: str) -> list[bytes]:
        """Remove and return what ``host`` received so far."""
        with self.cond:
            frames = self.frames[host]
            self.frames[host] = []
        return frames

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
        """Wait until predicate() holds (re-checked on every delivery and every 10 ms)."""
        return wait_on(self.cond, predicate, timeout, 0.01)

    def delivered(self) -> int:
        """Frames delivered to all hosts (not yet taken)."""
        with self.cond:
            return sum(len(f) for f in self.frames.values())


class WireFabric(Protocol):
    """The real-time fabrics' API (embedded switches in this process, or BMv2 processes): the
    controller tests and the demo's link failure drive either through it."""

    spec: TopologySpec
    inbox: HostInboxes

    def __enter__(self) -> Any: ...
    def __exit__(self, *exc: object) -> None: ...
    def start(self) -> None: ...
    def stop(self) -> None: ...
    @property
    def addresses(self) -> dict[str, str]: ...
    def restart_switch(self, name: str) -> None: ...
    def kill_switch(self, name: str) -> None: ...
    def revive_switch(self, name: str) -> None: ...
    def cut_link(self, a: str, b: str) -> None: ...
    def heal_link(self, a: str, b: str) -> None: ...
    def send(self, host: str, frame: bytes) -> None: ...
    def tx_packets(self, switch: str, port: int) -> int: ...
