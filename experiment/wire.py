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
    EmbeddedFabric,
    EmbeddedSwitch,
    HostInboxes,
    PortWire,
    serve_switch,
    wiring,
)
from icefabric.topo.model import Switch
from icefabric.topo.spec import TopologySpec

log = logging.getLogger(__name__)


class InProcessFabric(EmbeddedFabric):
    """Embedded switches of a topology with in-process wires; use as a context manager."""

    def __init__(
        self, spec: TopologySpec, *, fabric_pps: int | None = None, host: str = "127.0.0.1"
    ) -> None:
        super().__init__(spec, host=host)
        self.fabric_pps = fabric_pps  # drain rate of switch-to-switch ports (None: unlimited)
        self.inbox = HostInboxes(h.name for h in spec.hosts)
        self._dead: dict[str, int] = {}  # killed switch -> its gRPC port

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> InProcessFabric:
        self.start()
        return self

    def stop(self) -> None:
        """Stop every server and scheduler."""
        for sw in self.switches.values():
            sw.server.stop(grace=None)
            sw.device.stop()
        self.switches.clear()

    def _serve(self, switch: Switch, addr: str) -> EmbeddedSwitch:
        sw = serve_switch(self.spec, switch, addr)
        sw.device.start()  # its own scheduler thread, on the wall clock
        log.debug("%s: embedded switch on %s:%d", switch.name, self.bind_host, sw.port)
        return sw

    def _connect(self, w: PortWire) -> None:
        dev = self.switches[w.switch].device
        if w.host is not None:
            dev.attach_port(w.port, self._to_host(w.peer))
            return
        dev.attach_port(w.port, self._to_switch(w.switch, w.port, w.peer, w.peer_port))
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
        """P4Runtime address of every switch (a killed one keeps its address)."""
        out = dict(super().addresses)
        out.update({name: f"{self.bind_host}:{port}" for name, port in self._dead.items()})
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
        self.switches[name] = self._serve(self.spec.switch(name), f"{self.bind_host}:{port}")
        for w in wiring(self.spec):
            if w.switch == name:
                self._connect(w)

    # ------------------------------------------------------------------ traffic

    def send(self, host: str, frame: bytes) -> None:
        """A frame leaves ``host`` towards its leaf."""
        h = self.spec.host(host)
        self.switches[h.leaf].device.inject(h.port, frame)

    def tx_packets(self, switch: str, port: int) -> int:
        """Packets the switch has sent out of ``port`` since it started."""
        return int(self.switches[switch].device.tx_packets[port])
