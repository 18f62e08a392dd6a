"""A whole fabric in one process: one embedded switch per topology switch, wired per the links.

:class:`InProcessFabric` is the one in-process fabric of embedded switches: it serves every
switch's P4Runtime on ``127.0.0.1:<free port>``, wires every port (``experiment/wiring.py``'s
:func:`~icefabric.experiment.wiring.wiring`), cuts links, kills and revives switches and stops
everything it started. How time passes and how a wire carries a frame is the
:class:`Transport` it is given:

* :class:`RealTime` (the default): each switch runs its real-time scheduler thread on the
  wall clock, what leaves a switch port is injected into the peer switch's port at once, what
  leaves a host port lands in that host's inbox (the fabric's ``inbox``,
  :class:`~icefabric.experiment.wiring.HostInboxes`: ``take``, ``wait_for``, ``delivered``);
  fabric ports optionally rate-limited so queues build. No root, no namespaces: this is what
  ``make demo``'s link failure and the fabric end-to-end tests run the controller against.
* :class:`~icefabric.experiment.virtual_fabric.VirtualFabric` (virtual time): the switches on
  one ``ManualClock`` with no scheduler thread, a wire a discrete-event queue with serialisation
  time and link delay, host ports reaching the engine's endpoints.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Protocol

from icefabric.experiment.wiring import (
    EmbeddedSwitch,
    HostInboxes,
    PortWire,
    RelayedFabric,
    serve_switch,
    wiring,
)
from icefabric.topo.model import Switch
from icefabric.topo.spec import TopologySpec

log = logging.getLogger(__name__)


class Transport(Protocol):
    """How an :class:`InProcessFabric`'s switches keep time and how its wires carry frames."""

    def start_switch(self, spec: TopologySpec, switch: Switch, addr: str) -> EmbeddedSwitch:
        """Build ``switch`` on this transport's clock and serve its P4Runtime on ``addr``
        (with its scheduler running, where the transport has one)."""
        ...

    def attach_wire(self, fabric: InProcessFabric, w: PortWire) -> None:
        """Carry the frames leaving ``w``'s port (of ``fabric.switches[w.switch]``) to what
        the wire reaches (dropping them while ``fabric.cut_ports`` holds the port)."""
        ...


class RealTime:
    """Real time: each switch's scheduler thread on the wall clock, a wire injects into the
    peer at once, a host port delivers to the fabric's inbox; switch-to-switch ports drain at
    ``fabric_pps`` packets/s (None: unlimited)."""

    def __init__(self, *, fabric_pps: int | None = None) -> None:
        self.fabric_pps = fabric_pps

    def start_switch(self, spec: TopologySpec, switch: Switch, addr: str) -> EmbeddedSwitch:
        """An embedded switch serving ``addr``, its scheduler thread running."""
        sw = serve_switch(spec, switch, addr)
        sw.device.start()  # its own scheduler thread, on the wall clock
        log.debug("%s: embedded switch on %s (port %d)", switch.name, addr, sw.port)
        return sw

    def attach_wire(self, fabric: InProcessFabric, w: PortWire) -> None:
        """Frames leaving ``w``'s port go to the peer switch at once, or to the host's inbox."""
        dev = fabric.switches[w.switch].device
        if w.host is not None:
            dev.attach_port(w.port, functools.partial(fabric.inbox.deliver, w.peer))
            return
        dev.attach_port(w.port, _to_switch(fabric, w))
        if self.fabric_pps is not None:
            dev.set_queue_rate(w.port, pps=self.fabric_pps)


def _to_switch(fabric: InProcessFabric, w: PortWire) -> Callable[[bytes], None]:
    src, cut, switches = (w.switch, w.port), fabric.cut_ports, fabric.switches

    def send(data: bytes) -> None:
        if src in cut:
            return
        peer = switches.get(w.peer)
        if peer is not None:
            peer.device.inject(w.peer_port, data)

    return send


class InProcessFabric(RelayedFabric):
    """A topology's embedded switches serving P4Runtime on ``host``, wired per
    :func:`~icefabric.experiment.wiring.wiring`, in the time of ``transport`` (default
    :class:`RealTime`); a context manager."""

    def __init__(
        self,
        spec: TopologySpec,
        transport: Transport | None = None,
        *,
        host: str = "127.0.0.1",
    ) -> None:
        self.spec = spec
        self.transport: Transport = transport if transport is not None else RealTime()
        self.bind_host = host  # where the switches serve P4Runtime (loopback unless a test says)
        self.switches: dict[str, EmbeddedSwitch] = {}
        self.inbox = HostInboxes(h.name for h in spec.hosts)
        self.cut_ports: set[tuple[str, int]] = set()
        self._dead: dict[str, int] = {}  # killed switch -> its gRPC port
        self._started = False

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> InProcessFabric:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Serve every switch (no pipeline yet: the controller pushes it), then wire the ports."""
        if self._started:
            return
        self._started = True
        for s in self.spec.switches:
            self.switches[s.name] = self.transport.start_switch(self.spec, s, f"{self.bind_host}:0")
        for w in wiring(self.spec):
            self.transport.attach_wire(self, w)

    def stop(self) -> None:
        """Stop every switch: its P4Runtime server, the server's idle scanner, its scheduler."""
        for sw in self.switches.values():
            _halt(sw)
        self.switches.clear()
        self._dead.clear()
        self._started = False

    @property
    def addresses(self) -> dict[str, str]:
        """P4Runtime address of every switch (a killed one keeps its address)."""
        out = {name: f"{self.bind_host}:{sw.port}" for name, sw in self.switches.items()}
        out.update({name: f"{self.bind_host}:{port}" for name, port in self._dead.items()})
        return out

    # ------------------------------------------------------------------ events

    def kill_switch(self, name: str) -> None:
        """Stop a switch: its P4Runtime server goes away and its links carry nothing."""
        old = self.switches.pop(name)
        self._dead[name] = old.port
        _halt(old)

    def revive_switch(self, name: str) -> None:
        """Start a fresh switch (no pipeline, no entries) where a killed one was."""
        port = self._dead.pop(name)
        addr = f"{self.bind_host}:{port}"
        self.switches[name] = self.transport.start_switch(self.spec, self.spec.switch(name), addr)
        for w in wiring(self.spec):
            if w.switch == name:
                self.transport.attach_wire(self, w)

    # ------------------------------------------------------------------ traffic

    def send(self, host: str, frame: bytes) -> None:
        """A frame leaves ``host`` towards its leaf."""
        h = self.spec.host(host)
        self.switches[h.leaf].device.inject(h.port, frame)

    def tx_packets(self, switch: str, port: int) -> int:
        """Packets the switch has sent out of ``port`` since it started."""
        return int(self.switches[switch].device.tx_packets[port])


def _halt(sw: EmbeddedSwitch) -> None:
    """Stop one switch's threads: its server (waited for), the idle scanner, the scheduler."""
    sw.server.stop(grace=None).wait()
    if sw.service is not None:
        sw.service.close()
    sw.device.stop()
