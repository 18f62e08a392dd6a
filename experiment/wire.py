"""A whole fabric in one process: one embedded switch per topology switch, wired per the links.

Each switch is an :class:`icefabric.target.device.Device` running its real-time scheduler and
serving P4Runtime on ``127.0.0.1:<free port>``; what leaves a switch port is injected into the
peer switch's port (the "wire"), what leaves a host port lands in that host's inbox
(:class:`HostInboxes`, the fabric's ``inbox``: ``take``, ``wait_for``, ``delivered``). No root, no
namespaces: this is what ``make demo`` and the fabric end-to-end tests run the controller against.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from icefabric.p4src.ice_p4 import CPU_PORT
from icefabric.topo.spec import TopologySpec
from icefabric.waiting import wait_on

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Switch:
    name: str
    device: Any
    server: Any
    port: int  # gRPC port


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


def link_ports(spec: TopologySpec, a: str, b: str) -> list[tuple[str, int]]:
    """Both ends (switch, port) of every link between switches a and b."""
    return [
        end
        for ln in spec.links
        if {ln.a.node, ln.b.node} == {a, b}
        for end in ((ln.a.node, ln.a.port), (ln.b.node, ln.b.port))
    ]


class InProcessFabric:
    """Embedded switches of a topology with in-process wires; use as a context manager."""

    def __init__(
        self, spec: TopologySpec, *, fabric_pps: int | None = None, host: str = "127.0.0.1"
    ) -> None:
        self.spec = spec
        self.host = host  # where the switches serve P4Runtime (loopback unless a test says)
        self.fabric_pps = fabric_pps  # drain rate of switch-to-switch ports (None: unlimited)
        self.switches: dict[str, _Switch] = {}
        self.inbox = HostInboxes(h.name for h in spec.hosts)
        self._cut: set[tuple[str, int]] = set()
        self._dead: dict[str, int] = {}  # killed switch -> its gRPC port

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> InProcessFabric:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start every switch (no pipeline yet: the controller pushes it) and wire the ports."""
        for s in self.spec.switches:
            self.switches[s.name] = self._start_switch(s.name, s.device_id, f"{self.host}:0")
        for s in self.spec.switches:
            self._wire(s.name)

    def stop(self) -> None:
        """Stop every server and scheduler."""
        for sw in self.switches.values():
            sw.server.stop(grace=None)
            sw.device.stop()
        self.switches.clear()

    def _start_switch(self, name: str, device_id: int, addr: str) -> _Switch:
        from icefabric.target.device import Device
        from icefabric.target.server import serve

        device = Device(
            device_id=device_id,
            cpu_port=CPU_PORT,
            log=logging.getLogger(f"icefabric.target.device.{name}"),
            priority_queues=self.spec.defaults.priority_queues,  # as the spec says (Mininet too)
        )
        server, port, _service = serve(device, addr)
        device.start()
        log.debug("%s: embedded switch on %s:%d", name, self.host, port)
        return _Switch(name=name, device=device, server=server, port=port)

    def _wire(self, name: str) -> None:
        dev = self.switches[name].device
        for ln in self.spec.links:
            for here, there in ((ln.a, ln.b), (ln.b, ln.a)):
                if here.node == name:
                    dev.attach_port(
                        here.port, self._to_switch(name, here.port, there.node, there.port)
                    )
                    if self.fabric_pps is not None:
                        dev.set_queue_rate(here.port, pps=self.fabric_pps)
        for h in self.spec.hosts:
            if h.leaf == name:
                dev.attach_port(h.port, self._to_host(h.name))

    def _to_switch(
        self, src: str, src_port: int, dst: str, dst_port: int
    ) -> Callable[[bytes], None]:
        def send(data: bytes) -> None:
            if (src, src_port) in self._cut:
                return
            peer = self.switches.get(dst)
            if peer is not None:
                peer.device.inject(dst_port, data)

        return send

    def _to_host(self, host: str) -> Callable[[bytes], None]:
        return functools.partial(self.inbox.deliver, host)

    @property
    def addresses(self) -> dict[str, str]:
        """P4Runtime address of every switch."""
        out = {name: f"{self.host}:{sw.port}" for name, sw in self.switches.items()}
        out.update({name: f"{self.host}:{port}" for name, port in self._dead.items()})
        return out

    # ------------------------------------------------------------------ events

    def restart_switch(self, name: str) -> None:
        """Stop a switch and start a fresh one (no pipeline, no entries) on the same address."""
        self.kill_switch(name)
        self.revive_switch(name)

    def kill_switch(self, name: str) -> None:
        """Stop a switch: its P4Runtime server goes away and its links carry nothing."""
        old = self.switches.pop(name)
        self._dead[name] = old.port
        old.server.stop(grace=None).wait()
        old.device.stop()

    def revive_switch(self, name: str) -> None:
        """Start a fresh switch (no pipeline, no entries) where a killed one was."""
        port = self._dead.pop(name)
        spec_sw = self.spec.switch(name)
        self.switches[name] = self._start_switch(name, spec_sw.device_id, f"{self.host}:{port}")
        self._wire(name)

    def cut_link(self, a: str, b: str) -> None:
        """Drop everything on the link(s) between switches a and b, both directions."""
        self._cut.update(link_ports(self.spec, a, b))

    def heal_link(self, a: str, b: str) -> None:
        """Undo :meth:`cut_link`."""
        self._cut.difference_update(link_ports(self.spec, a, b))

    # ------------------------------------------------------------------ traffic

    def send(self, host: str, frame: bytes) -> None:
        """A frame leaves ``host`` towards its leaf."""
        h = self.spec.host(host)
        self.switches[h.leaf].device.inject(h.port, frame)

    def tx_packets(self, switch: str, port: int) -> int:
        """Packets the switch has sent out of ``port`` since it started."""
        return int(self.switches[switch].device.tx_packets[port])
