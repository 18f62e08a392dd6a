"""Data-plane test harness: the same packets-in/packets-out API over two targets.

* ``ICE_TARGET=embedded`` (default): every switch is an in-process
  :class:`icefabric.target.device.Device` on one shared :class:`ManualClock`, each with the
  embedded P4Runtime server on ``127.0.0.1:0``.  Switches are chained in-process: what leaves a
  linked port is injected into the peer switch.
* ``ICE_TARGET=bmv2``: p4c-bm2-ss compiles ``p4src/ice.p4`` once (into the build cache of
  ``target/bmv2.py``, shared with ``make p4`` and ``--target bmv2``); every switch is a
  ``simple_switch_grpc`` process in a private network namespace, links and host ports are veth
  pairs there, packets are sent and captured on the host ends with AF_PACKET sockets, and the
  P4Runtime server listens on a Unix socket (reachable from outside the namespace). The
  namespace helpers (tool and root check, AF_PACKET I/O) are :mod:`icefabric.experiment.netns`.

Either way tables are written over P4Runtime with the controller's client library
(:mod:`icefabric.control.p4rt`), so one test body runs on both targets.

``ICE_P4_PROGRAM`` overrides the P4 main file (default: the packaged ``p4src/ice.p4``).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from icefabric.control.p4rt import (
    CloneSessionEntry,
    CounterEntry,
    DirectCounterEntry,
    Entity,
    PacketIn,
    PipelineConfig,
    SwitchConnection,
    TableEntry,
)
from icefabric.experiment.netns import (
    THRIFT_BASE_PORT,
    NetnsSockets,
    TargetUnavailable,
    bmv2_unavailable_reason,
    run_checked,
)
from icefabric.p4src import ICE_P4
from icefabric.target import bmv2
from icefabric.traffic.packets import CPU_PORT
from icefabric.waiting import Deadline, poll_until

LOG = logging.getLogger("icefabric.tests.dataplane")

TARGET_ENV = "ICE_TARGET"
PROGRAM_ENV = "ICE_P4_PROGRAM"
START_US = 1_000_000  # the manual clock starts above 0 ("never seen" in flowlet registers)

# Queues per egress port the test switches run with (BMv2: --priority-queues), as the example
# topologies say; leaf_spine.py writes IceIngress.queue_config for it as the controller does.
PRIORITY_QUEUES = 8


def target_name() -> str:
    """The target chosen by ICE_TARGET (embedded when unset)."""
    name = os.environ.get(TARGET_ENV, "embedded").strip().lower() or "embedded"
    if name not in ("embedded", "bmv2"):
        raise ValueError(f"{TARGET_ENV}={name!r}: expected 'embedded' or 'bmv2'")
    return name


def program_path() -> Path:
    """The P4 main file under test."""
    override = os.environ.get(PROGRAM_ENV)
    path = Path(override) if override else Path(ICE_P4)
    if not path.is_file():
        raise FileNotFoundError(f"{PROGRAM_ENV}: no P4 program at {path}")
    return path


def wait_until(predicate: Callable[[], bool], timeout: float = 15.0) -> bool:
    """Poll ``predicate`` every 20 ms until it holds or ``timeout`` passes; whether it holds."""
    return poll_until(predicate, timeout)


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll `predicate` until it holds; AssertionError naming `what` at the deadline."""
    if not poll_until(predicate, timeout, 0.005):
        raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")


# ------------------------------------------------------------------------------------------------
# One switch: its P4Runtime connection plus conveniences the tests use.
# ------------------------------------------------------------------------------------------------
@dataclass
class SwitchHandle:
    """A switch under test, programmed over P4Runtime."""

    name: str
    conn: SwitchConnection
    _packet_ins: deque[PacketIn] = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def attach(self) -> None:
        """Start collecting PacketIn messages from the stream."""
        self.conn.on("packet", self._on_packet_in)

    def _on_packet_in(self, msg: PacketIn) -> None:
        with self._lock:
            self._packet_ins.append(msg)

    def insert(self, entities: Entity | Iterable[Entity]) -> None:
        """Insert entities (table entries, clone sessions ...)."""
        self.conn.insert(entities)

    def add(self, table: str, match: Mapping[str, Any], action: str, **params: Any) -> None:
        """Insert one table entry."""
        self.conn.insert(TableEntry(table=table, match=match, action=action, params=params))

    def set_default(self, table: str, action: str, **params: Any) -> None:
        """Set a table's default action (how keyless tables are programmed)."""
        self.conn.modify(
            TableEntry(table=table, action=action, params=params, is_default_action=True)
        )

    def clone_session(self, session_id: int, ports: Iterable[int]) -> None:
        """Create a clone session with one replica per port."""
        self.conn.insert(CloneSessionEntry(session_id=session_id, replicas=tuple(ports)))

    def counter(self, name: str, index: int) -> tuple[int, int]:
        """(packets, bytes) of one indexed counter cell."""
        cells = self.conn.read(CounterEntry(counter=name, index=index))
        for cell in cells:
            if isinstance(cell, CounterEntry) and cell.data is not None:
                return cell.data.packet_count, cell.data.byte_count
        return 0, 0

    def direct_counters(self, table: str, key: str) -> dict[Any, int]:
        """Packets per entry of a table with a direct counter, by the value of match field `key`."""
        out: dict[Any, int] = {}
        for cell in self.conn.read_direct_counters(table):
            if isinstance(cell, DirectCounterEntry) and cell.data is not None:
                out[cell.table_entry.match[key]] = cell.data.packet_count
        return out

    def register(self, name: str, index: int) -> int:
        """One register cell."""
        values = self.conn.register_values(name)
        return int(values.get(index, 0))

    def packet_ins(self) -> list[PacketIn]:
        """PacketIn messages received so far (and forget them)."""
        with self._lock:
            out = list(self._packet_ins)
            self._packet_ins.clear()
        return out

    def wait_packet_ins(self, count: int, timeout: float = 5.0) -> list[PacketIn]:
        """Wait until at least `count` PacketIns arrived; return all of them."""
        got: list[PacketIn] = []

        def enough() -> bool:
            got.extend(self.packet_ins())
            return len(got) >= count

        wait_for(enough, timeout, f"{count} packet-in(s) from {self.name}")
        return got


# ------------------------------------------------------------------------------------------------
# Fabric: several switches, links between them, host ports.
# ------------------------------------------------------------------------------------------------
class Fabric(ABC):
    """Switches plus links; hosts send into and receive from unlinked ports."""

    kind = "abstract"

    def __init__(self) -> None:
        self.switches: dict[str, SwitchHandle] = {}
        self.links: dict[tuple[str, int], tuple[str, int]] = {}

    def __getitem__(self, name: str) -> SwitchHandle:
        return self.switches[name]

    @abstractmethod
    def add_switch(self, name: str, ports: Iterable[int]) -> SwitchHandle:
        """Create a switch with these data ports, load the program, become primary."""

    def start(self) -> None:
        """Bring the fabric up once every switch and link is declared (before table writes).

        Targets that need no bring-up step (the in-process embedded fabric) keep this default.
        """
        return None

    def link(self, a: str, port_a: int, b: str, port_b: int) -> None:
        """Connect port_a of switch a to port_b of switch b."""
        for end in ((a, port_a), (b, port_b)):
            if end in self.links:
                raise ValueError(f"port {end[1]} of {end[0]} is already linked")
        self.links[(a, port_a)] = (b, port_b)
        self.links[(b, port_b)] = (a, port_a)

    @abstractmethod
    def send(self, switch: str, port: int, data: bytes) -> None:
        """A host attached to (switch, port) sends a frame."""

    def send_paced(self, switch: str, port: int, frames: Iterable[bytes], gap_us: int) -> None:
        """Send frames from the host on (switch, port) `gap_us` apart in the target's time.

        Nothing settles between them, so on a real-time target the gaps are the pacing alone
        (plus the time one send takes), not the pacing plus a quiet interval as with
        `advance_us`. The fabric is run after the last frame."""
        for i, frame in enumerate(frames):
            if i:
                self._pause_us(gap_us)
            self.send(switch, port, frame)
        self.run()

    @abstractmethod
    def _pause_us(self, us: int) -> None:
        """Let `us` microseconds pass without waiting for the fabric to settle."""

    @abstractmethod
    def run(self) -> None:
        """Let every packet that can move now move (through links) until the fabric is quiet."""

    @abstractmethod
    def advance_us(self, us: int) -> None:
        """Let `us` microseconds pass, then run."""

    @abstractmethod
    def received(self, switch: str, port: int) -> list[bytes]:
        """Frames that left (switch, port) towards a host since the last call."""

    @abstractmethod
    def set_queue_rate(self, switch: str, port: int, pps: int) -> None:
        """Limit a port's egress queue to `pps` packets per second."""

    def wait_received(
        self, switch: str, port: int, count: int, timeout: float = 5.0
    ) -> list[bytes]:
        """Run until at least `count` frames left (switch, port) towards a host; return them.

        For packets that enter asynchronously (P4Runtime packet-out, real-time targets)."""
        got: list[bytes] = []

        def enough() -> bool:
            self.run()
            got.extend(self.received(switch, port))
            return len(got) >= count

        wait_for(enough, timeout, f"{count} frame(s) out of {switch} port {port}")
        return got

    def close(self) -> None:
        """Tear everything down."""
        for sw in self.switches.values():
            with contextlib.suppress(Exception):
                sw.conn.close()


@functools.lru_cache(maxsize=4)
def _embedded_pipeline(path: str, mtime: float) -> PipelineConfig:
    """P4Info and bundle of the program (compiled once per file version)."""
    return PipelineConfig.for_embedded(path)


@functools.lru_cache(maxsize=4)
def _load_bundle_cached(data: bytes) -> Any:
    from icefabric.target.bundle import load_bundle

    return load_bundle(data)


class EmbeddedFabric(Fabric):
    """In-process Devices on one ManualClock, each served over P4Runtime on 127.0.0.1:0."""

    kind = "embedded"

    def __init__(self, priority_queues: int = PRIORITY_QUEUES) -> None:
        super().__init__()
        self.priority_queues = priority_queues
        from icefabric.target.runtime.clock import ManualClock

        self.clock = ManualClock(start_us=START_US)
        self.devices: dict[str, Any] = {}
        self._servers: list[Any] = []
        self._host_out: dict[tuple[str, int], deque[bytes]] = defaultdict(deque)
        path = program_path()
        self._pipeline = _embedded_pipeline(str(path), path.stat().st_mtime)

    def add_switch(self, name: str, ports: Iterable[int]) -> SwitchHandle:
        from icefabric.target.device import Device
        from icefabric.target.server import serve

        device_id = len(self.devices) + 1
        device = Device(
            device_id=device_id,
            cpu_port=CPU_PORT,
            clock=self.clock,
            priority_queues=self.priority_queues,
        )
        server, port, _service = serve(
            device, "127.0.0.1:0", max_workers=4, loader=_load_bundle_cached
        )
        self._servers.append(server)
        conn = SwitchConnection(
            name, f"127.0.0.1:{port}", device_id=device_id, election_id=1, reconnect=False
        )
        conn.connect(timeout=10.0)
        handle = SwitchHandle(name, conn)
        handle.attach()
        conn.set_pipeline(self._pipeline)
        self.devices[name] = device
        self.switches[name] = handle
        del ports  # every port exists on the embedded target
        return handle

    def send(self, switch: str, port: int, data: bytes) -> None:
        self.devices[switch].inject(port, bytes(data))

    def run(self) -> None:
        for _ in range(10_000):
            moved = False
            for name, device in self.devices.items():
                device.run_until_idle()
                for port, data in device.collect():
                    moved = True
                    peer = self.links.get((name, port))
                    if peer is None:
                        self._host_out[(name, port)].append(data)
                    else:
                        self.devices[peer[0]].inject(peer[1], data)
            if not moved:
                return
        raise AssertionError("fabric did not settle: a forwarding loop?")

    def advance_us(self, us: int) -> None:
        self.clock.advance(us)
        self.run()

    def _pause_us(self, us: int) -> None:
        self.run()  # what the last frame set moving arrives first, as it would in real time
        self.clock.advance(us)

    def received(self, switch: str, port: int) -> list[bytes]:
        q = self._host_out[(switch, port)]
        out = list(q)
        q.clear()
        return out

    def set_queue_rate(self, switch: str, port: int, pps: int) -> None:
        self.devices[switch].set_queue_rate(port, pps=pps)

    def close(self) -> None:
        super().close()
        for server in self._servers:
            server.stop(grace=None)


# ------------------------------------------------------------------------------------------------
# BMv2: simple_switch_grpc processes in a network namespace.
# ------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=2)
def _bmv2_build(path: str, mtime: float) -> tuple[Path, Path]:
    """The program compiled with p4c-bm2-ss (target/bmv2.py's build cache); (json, p4info)."""
    return bmv2.build_pipeline(Path(path), purpose="ICE_TARGET=bmv2")


class Bmv2Fabric(Fabric):
    """simple_switch_grpc processes in one network namespace, wired by veth pairs."""

    kind = "bmv2"
    settle_s = 0.1  # BMv2 is real time: a fabric is quiet after this long without packets

    def __init__(self, priority_queues: int = PRIORITY_QUEUES) -> None:
        super().__init__()
        self.priority_queues = priority_queues
        reason = bmv2_unavailable_reason()
        if reason:
            raise TargetUnavailable(reason)
        path = program_path()
        self.json_path, self.p4info_path = _bmv2_build(str(path), path.stat().st_mtime)
        # Unique per fabric: a test may build several, and tests may run in parallel.
        self.netns = f"icedp-{uuid.uuid4().hex[:10]}"
        self.workdir = Path(tempfile.mkdtemp(prefix="ice-bmv2-"))
        run_checked(["ip", "netns", "add", self.netns], "netns")
        try:
            self.io = NetnsSockets(self.netns)
        except BaseException:
            subprocess.run(["ip", "netns", "del", self.netns], capture_output=True, check=False)
            shutil.rmtree(self.workdir, ignore_errors=True)
            raise
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._ports: dict[str, list[int]] = {}
        self._thrift: dict[str, int] = {}
        self._host_if: dict[tuple[str, int], str] = {}

    def _ip(self, *args: str) -> None:
        run_checked(["ip", "netns", "exec", self.netns, "ip", *args], "ip")

    def _ifname(self, switch: str, port: int) -> str:
        idx = list(self._ports).index(switch)
        return f"s{idx}p{port}"

    def add_switch(self, name: str, ports: Iterable[int]) -> SwitchHandle:
        self._ports[name] = sorted(ports)
        # Links are declared after switches: processes start in start().
        handle = SwitchHandle(
            name, SwitchConnection(name, self._grpc_addr(name), device_id=0, election_id=1)
        )
        self.switches[name] = handle
        return handle

    def _grpc_addr(self, name: str) -> str:
        return f"unix:{self.workdir}/{name}.grpc"

    def start(self) -> None:
        """Create every veth pair and start every switch (after all links are declared)."""
        # No IPv6 in the namespace: the kernel would send ND/MLD frames into the switches.
        for key in ("all", "default"):
            run_checked(
                [
                    "ip",
                    "netns",
                    "exec",
                    self.netns,
                    "sysctl",
                    "-qw",
                    f"net.ipv6.conf.{key}.disable_ipv6=1",
                ],
                "sysctl",
            )
        # Loopback up: each switch's thrift server (simple_switch_CLI) is reached on 127.0.0.1
        # inside the namespace, and only there (the namespace has no other address).
        self._ip("link", "set", "lo", "up")
        for name, ports in self._ports.items():
            for port in ports:
                ifname = self._ifname(name, port)
                peer = self.links.get((name, port))
                if peer is None:
                    host_if = f"h{ifname}"
                    self._ip("link", "add", ifname, "type", "veth", "peer", "name", host_if)
                    self._host_if[(name, port)] = host_if
                    for iface in (ifname, host_if):
                        self._ip("link", "set", iface, "up")
                    self.io.open(host_if)
                elif (name, port) < peer:
                    other = self._ifname(*peer)
                    self._ip("link", "add", ifname, "type", "veth", "peer", "name", other)
                    self._ip("link", "set", ifname, "up")
                    self._ip("link", "set", other, "up")
        for n, (name, ports) in enumerate(self._ports.items()):
            thrift = THRIFT_BASE_PORT + n  # the namespace is private: no clash with others
            self._thrift[name] = thrift
            cmd = [
                "ip",
                "netns",
                "exec",
                self.netns,
                "simple_switch_grpc",
                "--device-id",
                "0",
                "--thrift-port",
                str(thrift),
                "--log-file",
                str(self.workdir / f"{name}.log"),
                "--log-level",
                "warn",  # the default, trace, logs every packet: a slower switch
            ]
            for port in ports:
                cmd += ["-i", f"{port}@{self._ifname(name, port)}"]
            cmd += [
                "--no-p4",
                "--",
                "--grpc-server-addr",
                self._grpc_addr(name),
                "--cpu-port",
                str(CPU_PORT),
                "--priority-queues",
                str(self.priority_queues),
            ]
            self._procs[name] = subprocess.Popen(
                cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
        config = PipelineConfig.for_bmv2(self.json_path, self.p4info_path)
        for name, handle in self.switches.items():
            sock = self.workdir / f"{name}.grpc"
            wait_for(sock.exists, 20.0, f"simple_switch_grpc {name} to listen (log {self.workdir})")
            handle.conn.connect(timeout=20.0)
            handle.attach()
            handle.conn.set_pipeline(config)

    def send(self, switch: str, port: int, data: bytes) -> None:
        self.io.send(self._host_if[(switch, port)], data)

    def run(self) -> None:
        # Real time: wait until no host port received anything for settle_s.
        last = -1
        deadline = Deadline(10.0)
        while not deadline.expired:
            time.sleep(self.settle_s)  # real-time target: a quiet interval is the only signal
            seen = sum(len(self.io._rx[i]) for i in self._host_if.values())
            if seen == last:
                return
            last = seen

    def advance_us(self, us: int) -> None:
        time.sleep(us / 1e6)  # BMv2 timestamps are the real clock
        self.run()

    def _pause_us(self, us: int) -> None:
        time.sleep(us / 1e6)

    def received(self, switch: str, port: int) -> list[bytes]:
        return self.io.take(self._host_if[(switch, port)])

    def set_queue_rate(self, switch: str, port: int, pps: int) -> None:
        cmd = [
            "ip",
            "netns",
            "exec",
            self.netns,
            # with this Python: the CLI's `env python3` may lack the thrift module
            sys.executable,
            str(shutil.which("simple_switch_CLI")),
            "--thrift-port",
            str(self._thrift[switch]),
        ]
        proc = subprocess.run(
            cmd, input=f"set_queue_rate {pps} {port}\n", capture_output=True, text=True, check=False
        )
        # simple_switch_CLI exits 0 even when the command failed: its output says so.
        said = f"{proc.stdout}\n{proc.stderr}"
        if proc.returncode != 0 or "Error" in said or "Could not connect" in said:
            raise RuntimeError(f"set_queue_rate on {switch}: {said.strip()}")

    def close(self) -> None:
        super().close()
        for proc in self._procs.values():
            proc.terminate()
        for proc in self._procs.values():
            try:
                proc.wait(5.0)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.io.close()
        subprocess.run(["ip", "netns", "del", self.netns], capture_output=True, check=False)
        shutil.rmtree(self.workdir, ignore_errors=True)


def make_fabric(priority_queues: int = PRIORITY_QUEUES) -> Fabric:
    """A new, empty fabric of the target ICE_TARGET selects (egress queues per port)."""
    if target_name() == "bmv2":
        return Bmv2Fabric(priority_queues)
    return EmbeddedFabric(priority_queues)


@contextlib.contextmanager
def fabric_of(build: Callable[[Fabric], None]) -> Iterator[Fabric]:
    """A fabric built by `build(fabric)`, started, and torn down afterwards."""
    fab = make_fabric()
    try:
        build(fab)
        yield fab
    finally:
        fab.close()
