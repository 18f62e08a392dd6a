"""A whole topology of BMv2 switches for the controller tests: InProcessFabric's API on BMv2.

Every switch of the topology spec is a ``simple_switch_grpc`` process (``--device-id`` from the
spec) in one private network namespace, serving P4Runtime on a Unix socket; its thrift server
(its own ``--thrift-port``) is reachable only inside that namespace. Every switch port is a veth
pair whose far end this process holds with an AF_PACKET socket: frames leaving a fabric port are
relayed to the peer switch's port (the "wire", which :meth:`cut_link` cuts), frames leaving a
host port land in that host's inbox. So the controller tests (plans, failures, probes) run the
same scenarios on BMv2 as on :class:`icefabric.experiment.wire.InProcessFabric`: the same port
wiring, link cuts and inboxes (``icefabric.experiment.wiring``) and the same public API
(``WireFabric``, checked by ``tests/dataplane/test_fabric_api.py``). Needs root, ``ip`` and
``simple_switch_grpc`` (:func:`~icefabric.experiment.netns.bmv2_unavailable_reason`).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import uuid
from collections import Counter
from pathlib import Path

from icefabric.experiment.netns import (
    THRIFT_BASE_PORT,
    NetnsSockets,
    TargetUnavailable,
    bmv2_unavailable_reason,
    run_checked,
)
from icefabric.experiment.wiring import HostInboxes, RelayedFabric, wiring
from icefabric.p4src.ice_p4 import CPU_PORT
from icefabric.topo.spec import TopologySpec
from icefabric.waiting import poll_until

START_TIMEOUT_S = 20.0


class Bmv2WireFabric(RelayedFabric):
    """BMv2 switches of a topology with relayed wires; use as a context manager."""

    def __init__(self, spec: TopologySpec) -> None:
        reason = bmv2_unavailable_reason()
        if reason:
            raise TargetUnavailable(reason)
        self.spec = spec
        self.inbox = HostInboxes(h.name for h in spec.hosts)
        self.netns = f"icewire-{uuid.uuid4().hex[:10]}"
        self.workdir = Path(tempfile.mkdtemp(prefix="ice-bmv2-wire-"))
        self._cond = self.inbox.cond  # also guards the cut wires and the tx counters
        self.cut_ports: set[tuple[str, int]] = set()
        self._cut_lock = self._cond
        self._tx: Counter[tuple[str, int]] = Counter()
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        # far end of every switch port -> (switch, port); host ports -> host name
        self._end_of: dict[tuple[str, int], str] = {}
        self._port_of: dict[str, tuple[str, int]] = {}
        self._peer: dict[tuple[str, int], tuple[str, int]] = {}
        self._host_at: dict[tuple[str, int], str] = {}
        self._io: NetnsSockets | None = None
        self._index = {s.name: i for i, s in enumerate(spec.switches)}
        for w in wiring(spec):
            if w.host is None:
                self._peer[(w.switch, w.port)] = (w.peer, w.peer_port)
            else:
                self._host_at[(w.switch, w.port)] = w.peer

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> Bmv2WireFabric:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _ip(self, *args: str) -> None:
        run_checked(["ip", "netns", "exec", self.netns, "ip", *args], "ip")

    def _ports(self, name: str) -> list[int]:
        return sorted(p for (sw, p) in list(self._peer) + list(self._host_at) if sw == name)

    def start(self) -> None:
        """Create the namespace, every port's veth pair, and start every switch (no pipeline)."""
        run_checked(["ip", "netns", "add", self.netns], "netns")
        for key in ("all", "default"):  # no IPv6: the kernel would send ND/MLD into the switches
            sysctl = f"net.ipv6.conf.{key}.disable_ipv6=1"
            run_checked(["ip", "netns", "exec", self.netns, "sysctl", "-qw", sysctl], "sysctl")
        self._ip("link", "set", "lo", "up")  # thrift servers: 127.0.0.1 inside the namespace only
        self._io = NetnsSockets(self.netns, on_frame=self._on_frame)
        for s in self.spec.switches:
            for port in self._ports(s.name):
                sw_if, far = self._ifnames(s.name, port)
                self._ip("link", "add", sw_if, "type", "veth", "peer", "name", far)
                self._ip("link", "set", sw_if, "up")
                self._ip("link", "set", far, "up")
                self._end_of[(s.name, port)] = far
                self._port_of[far] = (s.name, port)
                self._io.open(far)
        for s in self.spec.switches:
            self._start_switch(s.name)
        for s in self.spec.switches:
            self._wait_listening(s.name)

    def stop(self) -> None:
        """Stop every switch, remove the namespace and the sockets' directory."""
        for name in list(self._procs):
            self._stop_switch(name)
        if self._io is not None:
            self._io.close()
            self._io = None
        subprocess.run(["ip", "netns", "del", self.netns], capture_output=True, check=False)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def _ifnames(self, name: str, port: int) -> tuple[str, str]:
        i = self._index[name]
        return f"w{i}p{port}", f"x{i}p{port}"

    def _sock(self, name: str) -> Path:
        return self.workdir / f"{name}.grpc"

    def _start_switch(self, name: str) -> None:
        sw = self.spec.switch(name)
        cmd = ["ip", "netns", "exec", self.netns, "simple_switch_grpc"]
        cmd += ["--device-id", str(sw.device_id)]
        cmd += ["--thrift-port", str(THRIFT_BASE_PORT + self._index[name])]
        cmd += ["--log-file", str(self.workdir / f"{name}.log"), "--log-level", "warn"]
        for port in self._ports(name):
            cmd += ["-i", f"{port}@{self._ifnames(name, port)[0]}"]
        cmd += ["--no-p4", "--", "--grpc-server-addr", f"unix:{self._sock(name)}"]
        cmd += ["--cpu-port", str(CPU_PORT)]
        cmd += ["--priority-queues", str(self.spec.defaults.priority_queues)]
        self._procs[name] = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def _wait_listening(self, name: str) -> None:
        proc = self._procs[name]

        def up() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"simple_switch_grpc {name} exited ({proc.returncode})")
            return self._sock(name).exists()

        if not poll_until(up, START_TIMEOUT_S, 0.005):
            raise RuntimeError(
                f"timed out after {START_TIMEOUT_S:g}s waiting for simple_switch_grpc {name} "
                "to listen"
            )

    def _stop_switch(self, name: str) -> None:
        proc = self._procs.pop(name)
        proc.terminate()
        try:
            proc.wait(5.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        with contextlib.suppress(FileNotFoundError):
            self._sock(name).unlink()

    @property
    def addresses(self) -> dict[str, str]:
        """P4Runtime address of every switch (Unix sockets)."""
        return {s.name: f"unix:{self._sock(s.name)}" for s in self.spec.switches}

    # ------------------------------------------------------------------ events

    def kill_switch(self, name: str) -> None:
        """Stop a switch: its P4Runtime server goes away and its links carry nothing."""
        self._stop_switch(name)

    def revive_switch(self, name: str) -> None:
        """Start a fresh switch (no pipeline, no entries) where a killed one was."""
        self._start_switch(name)
        self._wait_listening(name)

    # ------------------------------------------------------------------ traffic

    def _on_frame(self, iface: str, data: bytes) -> bool:
        """A frame left a switch port (I/O thread): relay it over the wire or deliver it."""
        src = self._port_of.get(iface)
        if src is None:
            return False
        with self._cond:
            self._tx[src] += 1
            host = self._host_at.get(src)
            if host is not None:
                self.inbox.deliver(host, data)
                return True
            peer = self._peer.get(src)
            if peer is None or src in self.cut_ports or peer[0] not in self._procs:
                return True
        assert self._io is not None
        self._io.send_here(self._end_of[peer], data)
        return True

    def send(self, host: str, frame: bytes) -> None:
        """A frame leaves ``host`` towards its leaf."""
        h = self.spec.host(host)
        assert self._io is not None
        self._io.send(self._end_of[(h.leaf, h.port)], frame)

    def tx_packets(self, switch: str, port: int) -> int:
        """Packets the switch has sent out of ``port`` since the fabric started."""
        with self._cond:
            return self._tx[(switch, port)]
