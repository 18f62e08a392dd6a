"""Mininet bring-up from a topology spec, with P4Runtime switch classes for both targets.

Every switch is a user-space process that serves P4Runtime on ``127.0.0.1:<grpc_port>`` and
owns the switch's veth interfaces as ``-i PORT@IFACE``:

* :class:`ICESwitch` runs the embedded target, ``ice-switch`` (this project, no toolchain
  needed), in the root namespace;
* :class:`BMv2Switch` runs BMv2's ``simple_switch_grpc`` (when it is installed) in a network
  namespace of its own, holding its interfaces: its thrift server (``simple_switch_CLI``), which
  listens on every address, is thus reachable only inside that namespace, on its own
  ``--thrift-port`` (:meth:`TopologySpec.thrift_port`). P4Runtime is served on a Unix socket
  there and relayed to ``127.0.0.1:<grpc_port>`` (:mod:`icefabric.topo.relay`).

Neither needs Open vSwitch. The switches start with no pipeline unless a P4 program (or, for
BMv2, p4c's JSON) is given; the controller (``icectl run``) pushes it over P4Runtime.

Hosts get their address and MAC from the spec and an on-link default route: they ARP for every
destination and the leaf answers from its controller-filled ARP table.

Switch processes run in sessions of their own (``setsid``), so Ctrl-C at ``mininet>`` (sent to
the CLI's foreground process group) never reaches them; :class:`SwitchWatch` prints one line
in the CLI as soon as one exits. Each switch's log is kept across starts (``ice-NAME.log`` and
the :data:`LOG_KEEP` previous ones, ``ice-NAME.log.1`` newest). ``--pcap DIR`` records every
switch port with ``tcpdump`` (``DIR/IFACE.pcap``), as p4-utils' ``pcap_dump`` does.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mininet.net import Mininet
from mininet.node import Switch

from icefabric.p4src.ice_p4 import CPU_PORT
from icefabric.private import default_log_dir, open_private_log
from icefabric.topo.relay import TcpToUnixRelay
from icefabric.topo.spec import SpecError, TopologySpec, load_topology
from icefabric.waiting import poll_until

# mininet.log makes every logger created after its import a MininetLogger with a console
# handler of its own (logging.setLoggerClass): each of this project's lines would print twice.
logging.setLoggerClass(logging.Logger)

log = logging.getLogger(__name__)

TARGETS = ("embedded", "bmv2")
DEFAULT_CPU_PORT = CPU_PORT
READY_TIMEOUT_S = 30.0
LOG_KEEP = 3  # previous switch logs kept: ice-NAME.log.1 .. ice-NAME.log.3
WATCH_INTERVAL_S = 0.2


class SwitchStartError(RuntimeError):
    """A switch process did not come up (exited, or its gRPC port never opened)."""


def ice_switch_command() -> str:
    """The ice-switch executable: next to this Python (a venv), else on PATH."""
    beside = Path(sys.executable).parent / "ice-switch"
    if beside.exists():
        return str(beside)
    found = shutil.which("ice-switch")
    if found is None:
        raise SwitchStartError("ice-switch not found next to python or on PATH; run `make setup`")
    return found


def wait_for_port(
    addr: str, port: int, deadline: float, proc: subprocess.Popen[Any] | None
) -> None:
    """Poll until ``addr:port`` accepts TCP, the process dies, or the deadline passes."""

    def accepts() -> bool:
        if proc is not None and proc.poll() is not None:
            raise SwitchStartError(f"switch process exited with status {proc.returncode}")
        try:
            with socket.create_connection((addr, port), timeout=0.2):
                return True
        except OSError:
            return False

    if not poll_until(accepts, deadline - time.monotonic(), 0.05):
        raise SwitchStartError(f"no P4Runtime server on {addr}:{port}")


def wait_for_unix(path: Path, deadline: float, proc: subprocess.Popen[Any]) -> None:
    """Poll until the Unix socket ``path`` accepts, the process dies, or the deadline passes."""

    def accepts() -> bool:
        if proc.poll() is not None:
            raise SwitchStartError(f"switch process exited with status {proc.returncode}")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            try:
                s.connect(str(path))
                return True
            except OSError:
                return False

    if not poll_until(accepts, deadline - time.monotonic(), 0.05):
        raise SwitchStartError(f"no P4Runtime server on unix:{path}")


def rotate_log(path: Path, keep: int = LOG_KEEP) -> None:
    """Shift ``path`` to ``path.1`` (``.1`` to ``.2`` ...), dropping the oldest beyond ``keep``.

    Renames only (the log folder is private): a link is moved, never followed."""
    for i in range(keep, 0, -1):
        older = path.with_name(f"{path.name}.{i}")
        newer = path if i == 1 else path.with_name(f"{path.name}.{i - 1}")
        if os.path.lexists(newer):
            os.replace(newer, older)


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class _P4RuntimeSwitchMixin:
    """Common start/stop for switch processes that serve P4Runtime and take ``-i PORT@IFACE``."""

    name: str
    intfs: dict[int, Any]
    command: Any  # each target class defines command() -> list[str]: how its process starts
    in_namespace = False  # True: the process and its interfaces live in a namespace of their own

    def __init__(self, name: str, **params: Any) -> None:
        p4rt = {k: params.pop(k) for k in list(params) if k in _P4RT_PARAMS}
        params["inNamespace"] = self.in_namespace
        super().__init__(name, **params)  # type: ignore[call-arg]  # Mininet Switch
        self._init_p4rt(**p4rt)

    def _init_p4rt(
        self,
        *,
        grpc_port: int,
        device_id: int,
        cpu_port: int = DEFAULT_CPU_PORT,
        log_dir: str | None = None,
        program: str | None = None,
        extra_args: Sequence[str] = (),
        priority_queues: int = 1,
        thrift_port: int | None = None,
    ) -> None:
        self.grpc_port = grpc_port
        self.thrift_port = thrift_port  # BMv2 only
        # --priority-queues: from the topology spec, which the controller reads too (it raises
        # control traffic to the top queue only when there is one; BMv2 drops above it).
        self.priority_queues = priority_queues
        self.device_id = device_id
        self.cpu_port = cpu_port
        self.program = program
        self.extra_args = list(extra_args)
        # Not /tmp: root writing a predictable name there follows another user's symlink.
        logs = Path(log_dir) if log_dir is not None else default_log_dir()
        self.log_path = logs / f"ice-{self.name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def port_args(self) -> list[str]:
        """``-i PORT@IFACE`` for every data-plane interface (Mininet's port numbering)."""
        args: list[str] = []
        for port, intf in sorted(self.intfs.items()):
            if intf.name == "lo":
                continue
            args += ["-i", f"{port}@{intf.name}"]
        return args

    def start(self, controllers: Sequence[Any]) -> None:
        """Start the switch process and wait until its P4Runtime port accepts connections."""
        for intf in self.intfs.values():
            if intf.name != "lo":
                self._run_here(["ethtool", "-K", intf.name, "rx", "off", "tx", "off", "sg", "off"])
        cmd = self.command()
        log.info("%s: %s", self.name, " ".join(cmd))
        try:
            rotate_log(self.log_path)
            out = open_private_log(self.log_path)
        except OSError as e:
            raise SwitchStartError(f"{self.name}: cannot open its log: {e}") from e
        with out:
            self.proc = self._spawn(cmd, out)
        try:
            self._await_ready(time.monotonic() + READY_TIMEOUT_S)
        except SwitchStartError as e:
            raise SwitchStartError(
                f"{self.name}: {e}; log {self.log_path}:\n{_tail(self.log_path)}"
            ) from e

    def _run_here(self, cmd: list[str]) -> None:
        """Run a short command where the switch's interfaces are (output ignored)."""
        subprocess.run(cmd, capture_output=True, check=False)

    def _spawn(self, cmd: list[str], out: Any) -> subprocess.Popen[bytes]:
        # A session of its own: Ctrl-C at mininet> signals the CLI's process group, not this.
        return subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def data_interfaces(self) -> list[str]:
        """The names of the switch's data-plane interfaces (port order)."""
        return [i.name for _, i in sorted(self.intfs.items()) if i.name != "lo"]

    def start_pcap(self, folder: Path) -> list[subprocess.Popen[bytes]]:
        """``tcpdump`` on every data port into ``folder/IFACE.pcap`` (own sessions)."""
        exe = shutil.which("tcpdump")
        if exe is None:
            raise SwitchStartError("--pcap needs tcpdump (apt-get install tcpdump)")
        procs = []
        for name in self.data_interfaces():
            cmd = [exe, "-i", name, "-U", "-s", "0", "-w", str(folder / f"{name}.pcap")]
            procs.append(self._spawn_quiet(cmd))
        return procs

    def _spawn_quiet(self, cmd: list[str]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            cmd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def _await_ready(self, deadline: float) -> None:
        wait_for_port("127.0.0.1", self.grpc_port, deadline, self.proc)

    def stop(self, deleteIntfs: bool = True) -> None:
        """Terminate the switch process, then let Mininet remove the interfaces."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        super().stop(deleteIntfs)  # type: ignore[misc]

    def dpctl(self, *args: Any, **kwargs: Any) -> str:
        """Mininet's dpctl has no meaning here: use `icectl shell SWITCH`."""
        return f"use `icectl shell {self.name}` (P4Runtime)"


class ICESwitch(_P4RuntimeSwitchMixin, Switch):  # type: ignore[misc]
    """The embedded target: ``ice-switch`` on this switch's veth interfaces."""

    def command(self) -> list[str]:
        cmd = [ice_switch_command(), *self.port_args()]
        cmd += ["--device-id", str(self.device_id)]
        cmd += ["--grpc-server-addr", f"127.0.0.1:{self.grpc_port}"]
        cmd += ["--cpu-port", str(self.cpu_port)]
        cmd += ["--priority-queues", str(self.priority_queues)]
        if self.program:
            cmd += ["--p4", self.program]
        return cmd + self.extra_args


class BMv2Switch(_P4RuntimeSwitchMixin, Switch):  # type: ignore[misc]
    """BMv2's ``simple_switch_grpc`` in a network namespace of its own, on its veth interfaces.

    Its thrift server listens on ``--thrift-port`` on every address of that namespace only (no
    address there but loopback); ``simple_switch_CLI`` reaches it through :meth:`cli`. Its
    P4Runtime server listens on a Unix socket, relayed to ``127.0.0.1:<grpc_port>``."""

    in_namespace = True

    def _init_p4rt(self, **params: Any) -> None:
        super()._init_p4rt(**params)
        self._sock_dir = Path(tempfile.mkdtemp(prefix=f"ice-{self.name}-"))  # 0700
        self.grpc_socket = self._sock_dir / "p4rt.sock"
        self.relay: TcpToUnixRelay | None = None

    def command(self) -> list[str]:
        exe = shutil.which("simple_switch_grpc")
        if exe is None:
            raise SwitchStartError("simple_switch_grpc is not on PATH (install BMv2)")
        from icefabric.target.bmv2 import Bmv2Unavailable, realtime_prefix

        try:
            prefix = realtime_prefix()  # $ICE_BMV2_RT_PRIORITY: SCHED_FIFO (module docstring)
        except Bmv2Unavailable as exc:
            raise SwitchStartError(str(exc)) from None
        cmd = [*prefix, exe, *self.port_args(), "--device-id", str(self.device_id)]
        if self.thrift_port is not None:
            cmd += ["--thrift-port", str(self.thrift_port)]
        cmd += [self.program] if self.program else ["--no-p4"]
        cmd += ["--", "--grpc-server-addr", f"unix:{self.grpc_socket}"]
        cmd += ["--cpu-port", str(self.cpu_port)]
        cmd += ["--priority-queues", str(self.priority_queues)]  # a target option: after "--"
        return cmd + self.extra_args

    def _run_here(self, cmd: list[str]) -> None:
        self.cmd(" ".join(cmd))

    def _spawn(self, cmd: list[str], out: Any) -> subprocess.Popen[bytes]:
        self.cmd("ip link set lo up")  # the thrift server: 127.0.0.1 of this namespace
        # no IPv6 here: the kernel's neighbour discovery on the switch's ports would reach the
        # next switch as frames ice.p4 drops (counted as "unsupported" in experiments' drops)
        self.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1")
        # Mininet's popen runs `mnexec -da PID`: -d is setsid, a session of its own.
        proc: subprocess.Popen[bytes] = self.popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        return proc

    def _spawn_quiet(self, cmd: list[str]) -> subprocess.Popen[bytes]:
        proc: subprocess.Popen[bytes] = self.popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        return proc

    def _await_ready(self, deadline: float) -> None:
        assert self.proc is not None
        wait_for_unix(self.grpc_socket, deadline, self.proc)
        try:
            self.relay = TcpToUnixRelay("127.0.0.1", self.grpc_port, str(self.grpc_socket))
        except OSError as e:
            raise SwitchStartError(f"cannot listen on 127.0.0.1:{self.grpc_port}: {e}") from e
        wait_for_port("127.0.0.1", self.grpc_port, deadline, self.proc)

    def cli(self, commands: str) -> str:
        """Run ``simple_switch_CLI`` commands against this switch (inside its namespace).

        The CLI exits 0 even when a command fails: an output line starting with "Error" or a
        failed connection raises :class:`SwitchStartError` naming the switch."""
        if self.thrift_port is None:
            raise SwitchStartError(f"{self.name}: started without a thrift port")
        exe = shutil.which("simple_switch_CLI")
        if exe is None:
            raise SwitchStartError("simple_switch_CLI is not on PATH (install BMv2)")
        # run by this Python: the script's `env python3` may be one without the thrift module
        cli = [sys.executable, exe, "--thrift-port", str(self.thrift_port)]
        proc = self.popen(cli, stdin=subprocess.PIPE)
        out_b, err_b = proc.communicate(commands.encode(), timeout=60)
        out: str = out_b.decode(errors="replace") + err_b.decode(errors="replace")
        if proc.returncode != 0 or "Error" in out or "Could not connect" in out:
            raise SwitchStartError(f"{self.name}: simple_switch_CLI failed: {out.strip()}")
        return out

    def set_queue_rate(self, pps: int, port: int | None = None) -> None:
        """Drain the egress queue(s) of ``port`` (every port when None) at ``pps`` packets/s."""
        self.cli(f"set_queue_rate {pps}" + (f" {port}" if port is not None else "") + "\n")

    def stop(self, deleteIntfs: bool = True) -> None:
        """Stop the relay and the switch; remove the socket directory."""
        if self.relay is not None:
            self.relay.close()
            self.relay = None
        super().stop(deleteIntfs)
        shutil.rmtree(self._sock_dir, ignore_errors=True)


_P4RT_PARAMS = (
    "grpc_port",
    "device_id",
    "cpu_port",
    "log_dir",
    "program",
    "extra_args",
    "priority_queues",
    "thrift_port",
)


def interface_names(spec: TopologySpec) -> list[str]:
    """The switch-side interface names Mininet gives ``spec``'s links (``NODE-ethPORT``)."""
    names = [f"{h.leaf}-eth{h.port}" for h in spec.hosts]
    for ln in spec.links:
        names += [f"{ln.a.node}-eth{ln.a.port}", f"{ln.b.node}-eth{ln.b.port}"]
    return sorted(set(names))


def busy_interfaces(spec: TopologySpec, net_dir: Path = Path("/sys/class/net")) -> list[str]:
    """Interfaces of ``spec`` that already exist here: another Mininet holds them."""
    return [n for n in interface_names(spec) if (net_dir / n).exists()]


def busy_message(spec: TopologySpec, busy: Sequence[str]) -> str:
    """The one-line refusal when another network holds ``busy``."""
    more = f" and {len(busy) - 3} more" if len(busy) > 3 else ""
    return (
        f"another Mininet network holds this topology's interfaces ({', '.join(busy[:3])}{more}): "
        "stop it (exit its CLI) or clean up with `mn -c`, then run again"
    )


def switch_class(target: str) -> type:
    """The Mininet switch class for ``target`` ("embedded" or "bmv2")."""
    if target == "embedded":
        return ICESwitch
    if target == "bmv2":
        return BMv2Switch
    raise ValueError(f"target: expected one of {', '.join(TARGETS)}, got {target!r}")


def build_network(
    spec: TopologySpec,
    *,
    target: str = "embedded",
    program: str | None = None,
    cpu_port: int = DEFAULT_CPU_PORT,
    log_dir: str | None = None,
    switch_args: Sequence[str] = (),
) -> Any:
    """A (not yet started) Mininet network for ``spec``: hosts, P4 switches, links by port."""
    cls = switch_class(target)
    net = Mininet(controller=None, build=False, autoSetMacs=False, autoStaticArp=False)
    for sw in spec.switches:
        thrift = {"thrift_port": spec.thrift_port(sw.name)} if cls is BMv2Switch else {}
        net.addSwitch(
            sw.name,
            cls=cls,
            **thrift,
            grpc_port=sw.grpc_port,
            device_id=sw.device_id,
            cpu_port=cpu_port,
            log_dir=log_dir,
            program=program,
            extra_args=list(switch_args),
            priority_queues=spec.defaults.priority_queues,
        )
    for h in spec.hosts:
        net.addHost(h.name, ip=h.ip, mac=h.mac)
        net.addLink(h.name, h.leaf, port1=0, port2=h.port)
    for ln in spec.links:
        net.addLink(ln.a.node, ln.b.node, port1=ln.a.port, port2=ln.b.port)
    return net


def configure_hosts(net: Any, spec: TopologySpec) -> None:
    """On-link default route, no IPv6 chatter, no checksum offload (user-space switches)."""
    for h in spec.hosts:
        node = net.get(h.name)
        intf = node.defaultIntf().name
        node.cmd(f"ethtool -K {intf} rx off tx off sg off")
        node.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1")
        node.cmd(f"ip route replace default dev {intf}")


class NetworkBusy(SwitchStartError):
    """Another Mininet network holds interfaces this topology needs."""


def start_network(spec: TopologySpec, **kwargs: Any) -> Any:
    """Build and start the network for ``spec``; stops what started if any switch fails.

    NetworkBusy (before anything is created) when another network holds its interfaces."""
    busy = busy_interfaces(spec)
    if busy:
        raise NetworkBusy(busy_message(spec, busy))
    net = build_network(spec, **kwargs)
    try:
        net.build()
        net.start()
        configure_hosts(net, spec)
    except Exception:
        net.stop()
        raise
    return net


class SwitchWatch:
    """A thread that prints one line as soon as a switch process exits (in the Mininet CLI).

    ``say`` gets the line (default: stdout, flushed); the controller sees the same death as a
    lost P4Runtime connection and fails the switch over (``icectl events``, ``icectl status``)."""

    def __init__(
        self,
        switches: Sequence[Any],
        *,
        say: Any = None,
        interval_s: float = WATCH_INTERVAL_S,
    ) -> None:
        self.switches = list(switches)
        self.say = say or self._print
        self.interval_s = interval_s
        self.reported: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="switch-watch", daemon=True)

    @staticmethod
    def _print(line: str) -> None:
        print(line, flush=True)

    def start(self) -> SwitchWatch:
        """Start watching."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching (before the network stops the switches on purpose)."""
        self._stop.set()
        self._thread.join(timeout=2)

    def check(self) -> list[str]:
        """One look at every switch: the lines for switches that exited since the last look."""
        lines = []
        for sw in self.switches:
            proc = getattr(sw, "proc", None)
            if sw.name in self.reported or proc is None or proc.poll() is None:
                continue
            self.reported.add(sw.name)
            rc = proc.returncode
            how = f"killed by signal {-rc}" if rc < 0 else f"exit status {rc}"
            lines.append(
                f"*** switch {sw.name} is DOWN: its process {proc.pid} exited ({how}); "
                f"log {sw.log_path}"
            )
        return lines

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            for line in self.check():
                self.say(line)


IPERF_BYTES = 1_000_000


def _read_until(proc: subprocess.Popen[bytes], marker: bytes, timeout_s: float) -> bytes:
    """Read ``proc``'s stdout until ``marker`` shows, it exits, or the time is up."""
    import select as _select

    assert proc.stdout is not None
    seen = b""
    deadline = time.monotonic() + timeout_s
    fd = proc.stdout.fileno()
    while marker not in seen and time.monotonic() < deadline:
        ready, _, _ = _select.select([fd], [], [], 0.1)
        if ready:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            seen += chunk
    return seen


def host_command() -> str:
    """The icefabric-host executable: next to this Python (a venv), else on PATH."""
    beside = Path(sys.executable).parent / "icefabric-host"
    return str(beside) if beside.exists() else (shutil.which("icefabric-host") or "icefabric-host")


def make_cli_class() -> type:
    """Mininet's CLI with two commands for P4 fabrics (built on demand: Mininet's CLI class
    reads the terminal when imported by some versions)."""
    from mininet.cli import CLI

    class IceCLI(CLI):  # type: ignore[misc]
        """Mininet's CLI plus ``crash`` and a built-in ``iperf``."""

        def do_crash(self, line: str) -> None:
            """crash SWITCH: kill -9 the switch's process (a failure drill: the controller
            routes around it, icectl status and icectl events say so)."""
            name = line.strip()
            node = self.mn.get(name) if name in self.mn else None
            proc = getattr(node, "proc", None)
            if proc is None or proc.poll() is not None:
                print(f"*** crash: {name or '?'} is not a running switch", flush=True)
                return
            os.kill(proc.pid, 9)
            print(f"*** crash: {name} (process {proc.pid}) killed", flush=True)

        def do_iperf(self, line: str) -> None:
            """iperf [SRC DST [BYTES]]: send BYTES (default 1000000) from SRC to DST as RoCEv2
            with icefabric-host and print both ends' summary lines. (Mininet's own iperf helper
            hangs with Debian 12's iperf 2.1.8, mininet/mininet#1060; `h2 iperf -s &` and
            `h1 iperf -c h2 -t 5` as host commands still work.)"""
            words = line.split()
            hosts = self.mn.hosts
            if len(words) not in (0, 2, 3) or (words and not all(w in self.mn for w in words[:2])):
                print("*** usage: iperf [SRC DST [BYTES]] (host names)", flush=True)
                return
            src, dst = (self.mn[w] for w in words[:2]) if words else (hosts[0], hosts[-1])
            nbytes = int(words[2]) if len(words) == 3 and words[2].isdigit() else IPERF_BYTES
            exe = host_command()
            print(
                f"*** iperf: {src.name} -> {dst.name}, {nbytes} bytes (icefabric-host)", flush=True
            )
            rx = dst.popen(
                [exe, "--expect", "1", "--duration", "120", "-v"], stderr=subprocess.STDOUT
            )
            early = _read_until(rx, b" ready on ", READY_TIMEOUT_S)
            tx = src.popen(
                [exe, "--flow", f"{dst.IP()}:{nbytes}", "--duration", "120"],
                stderr=subprocess.STDOUT,
            )
            for proc, before in ((tx, b""), (rx, early)):
                try:
                    out, _ = proc.communicate(timeout=150)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    out, _ = proc.communicate()
                for raw in (before + out).decode(errors="replace").splitlines(keepends=True):
                    if " INFO " not in raw:  # the receiver's -v lines: only its summary
                        sys.stdout.write(raw)
            sys.stdout.flush()

    return IceCLI


def setup_logging(verbose: bool = False) -> None:
    """Log this project's lines to stderr, leaving Mininet's own logger alone.

    Mininet prints its CLI output through the ``mininet`` logger, which also propagates to the
    root logger: a handler there prints every line twice (``Level 25 mininet: ...``)."""
    logger = logging.getLogger("icefabric")
    if not any(getattr(h, "_icefabric", False) for h in logger.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        handler._icefabric = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.setLevel(logging.INFO if verbose else logging.WARNING)
    logger.propagate = False


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m icefabric.topo.mininet`: bring a topology up in Mininet and open its CLI."""
    parser = argparse.ArgumentParser(
        prog="python -m icefabric.topo.mininet",
        description="Bring up a topology spec in Mininet with P4Runtime switches "
        "(needs root). The controller is started separately: icectl run --topo FILE.",
    )
    parser.add_argument("--topo", required=True, help="topology spec file (YAML or JSON)")
    parser.add_argument(
        "--target",
        choices=TARGETS,
        default=os.environ.get("ICE_TARGET", "embedded"),
        help="switch implementation (default: $ICE_TARGET or embedded)",
    )
    parser.add_argument(
        "--program",
        help="P4 source (embedded) or p4c JSON (bmv2) to load at "
        "start; default: none, the controller pushes the pipeline",
    )
    parser.add_argument("--cpu-port", type=int, default=DEFAULT_CPU_PORT)
    parser.add_argument(
        "--log-dir",
        default=None,
        help="switch logs: LOG_DIR/ice-NAME.log (default: the private runtime dir's logs/, "
        "see control/README.md)",
    )
    parser.add_argument(
        "--pcap",
        metavar="DIR",
        type=Path,
        help="record every switch port with tcpdump into DIR/IFACE.pcap (created 0700)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log switch start-up lines")
    parser.add_argument("--no-cli", action="store_true", help="start, print the net, then stop")
    args = parser.parse_args(argv)
    setup_logging(args.verbose)
    if os.geteuid() != 0:
        print("error: Mininet needs root (network namespaces and veth pairs)", file=sys.stderr)
        return 2
    try:
        spec = load_topology(args.topo)
    except (OSError, SpecError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    # Hosts inherit this environment: icefabric-host finds the topology and target with no
    # options (traffic/README.md, "In the Mininet CLI").
    os.environ["ICE_TOPOLOGY"] = str(Path(args.topo).resolve())
    os.environ["ICE_TARGET"] = args.target
    if args.pcap is not None:
        try:
            args.pcap.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as e:
            print(f"error: --pcap {args.pcap}: {e.strerror}", file=sys.stderr)
            return 2
    try:
        net = start_network(
            spec,
            target=args.target,
            program=args.program,
            cpu_port=args.cpu_port,
            log_dir=args.log_dir,
        )
    except SwitchStartError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    switches = [net.get(sw.name) for sw in spec.switches]
    captures: list[subprocess.Popen[bytes]] = []
    watch = SwitchWatch(switches).start()
    try:
        if args.pcap is not None:
            for node in switches:
                captures += node.start_pcap(args.pcap)
            print(f"pcap: {len(captures)} port(s) recorded into {args.pcap}/IFACE.pcap")
        for sw in spec.switches:
            proc = net.get(sw.name).proc
            line = (
                f"{sw.name}: P4Runtime 127.0.0.1:{sw.grpc_port} device_id {sw.device_id}"
                f" pid {proc.pid if proc is not None else '-'}"
            )
            if args.target == "bmv2":
                port = spec.thrift_port(sw.name)
                line += (
                    f" thrift {port} (only inside {sw.name}'s namespace; in the Mininet CLI: "
                    f"{sw.name} simple_switch_CLI --thrift-port {port})"
                )
            print(line)
        if not args.no_cli:
            print(
                "extra commands: `crash SWITCH` (kill -9 it: a failover drill), "
                "`iperf [SRC DST [BYTES]]` (a RoCEv2 transfer with icefabric-host); "
                "Ctrl-C at the prompt leaves the switches running",
                flush=True,
            )
            make_cli_class()(net)
    except SwitchStartError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        watch.stop()
        for cap in captures:
            cap.terminate()
        for cap in captures:
            try:
                cap.wait(timeout=5)
            except subprocess.TimeoutExpired:
                cap.kill()
        net.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
