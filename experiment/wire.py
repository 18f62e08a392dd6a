"""A whole fabric in one process: one embedded switch per topology switch, wired per the links.

Each switch is an :class:`icefabric.target.device.Device` running its real-time scheduler and
serving P4Runtime on ``127.0.0.1:<free port>``; what leaves a switch port is injected into the
peer switch's port (the "wire"), what leaves a host port lands in that host's inbox
(:class:`~icefabric.experiment.wiring.HostInboxes`, the fabric's ``inbox``: ``take``,
``wait_for``, ``delivered``). No root, no namespaces: this is what ``make demo`` and the fabric
end-to-end tests run the controller against. The switches, the port wiring and the link cuts
are the ones every in-process fabric builds (``experiment/wiring.py``); here time is real and a
wire delivers at once.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

from icefabric.experiment.wiring import (
    CutLinks,
    EmbeddedSwitch,
    HostInboxes,
    serve_switch,
    wiring,
)
from icefabric.topo.spec import TopologySpec

log = logging.getLogger(__name__)


class InProcessFabric(CutLinks):
    """Embedded switches of a topology with in-process wires; use as a context manager."""

    def __init__(
        self, spec: TopologySpec, *, fabric_pps: int | None = None, host: str = "127.0.0.1"
    ) -> None:
        self.spec = spec
        self.host = host  # where the switches serve P4Runtime (loopback unless a test says)
        self.fabric_pps = fabric_pps  # drain rate of switch-to-switch ports (None: unlimited)
        self.switches: dict[str, EmbeddedSwitch] = {}
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
            self.switches[s.name] = self._start_switch(s.name, f"{self.host}:0")
        for s in self.spec.switches:
            self._wire(s.name)

    def stop(self) -> None:
        """Stop every server and scheduler."""
        for sw in self.switches.values():
            sw.server.stop(grace=None)
            sw.device.stop()
        self.switches.clear()

    def _start_switch(self, name: str, addr: str) -> EmbeddedSwitch:
        sw = serve_switch(self.spec, self.spec.switch(name), addr)
        sw.device.start()
        log.debug("%s: embedded switch on %s:%d", name, self.host, sw.port)
        return sw

    def _wire(self, name: str) -> None:
        dev = self.switches[name].device
        for w in wiring(self.spec):
            if w.switch != name:
                continue
            if w.host is not None:
                dev.attach_port(w.port, self._to_host(w.peer))
                continue
            dev.attach_port(w.port, self._to_switch(name, w.port, w.peer, w.peer_port))
            if self.fabric_pps is not None:
                dev.set_queue_rate(w.port, pps=self.fabric_pps)

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
        self.switches[name] = self._start_switch(name, f"{self.host}:{port}")
        self._wire(name)

    # ------------------------------------------------------------------ traffic

    def send(self, host: str, frame: bytes) -> None:
        """A frame leaves ``host`` towards its leaf."""
        h = self.spec.host(host)
        self.switches[h.leaf].device.inject(h.port, frame)

    def tx_packets(self, switch: str, port: int) -> int:
        """Packets the switch has sent out of ``port`` since it started."""
        return int(self.switches[switch].device.tx_packets[port])
