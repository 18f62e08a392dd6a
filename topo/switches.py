"""Mininet switch classes for the P4Runtime targets: one user-space process per switch.

Every switch serves P4Runtime on ``127.0.0.1:<grpc_port>`` and owns its veth interfaces as
``-i PORT@IFACE``:

* :class:`ICESwitch` runs the embedded target, ``ice-switch`` (this project, no toolchain
  needed), in the root namespace;
* :class:`BMv2Switch` runs BMv2's ``simple_switch_grpc`` (when it is installed) in a network
  namespace of its own, holding its interfaces: its thrift server (``simple_switch_CLI``), which
  listens on every address, is thus reachable only inside that namespace, on its own
  ``--thrift-port`` (:meth:`TopologySpec.thrift_port`). P4Runtime is served on a Unix socket
  there and relayed to ``127.0.0.1:<grpc_port>`` (:mod:`icefabric.topo.relay`).

Switch processes run in sessions of their own (``setsid``), so Ctrl-C at ``mininet>`` never
reaches them, and under ``setpriv --pdeathsig TERM`` (:func:`die_with_parent`), so a bring-up
killed by SIGKILL takes its switches and captures with it. Each switch's log is kept across starts (``ice-NAME.log`` and the
:data:`LOG_KEEP` previous ones, ``ice-NAME.log.1`` newest). The bring-up that builds a network
of them is :mod:`icefabric.topo.mininet`.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mininet.node import Switch

from icefabric.p4src.ice_p4 import CPU_PORT
from icefabric.private import default_log_dir, open_private_log
from icefabric.topo.relay import TcpToUnixRelay
from icefabric.waiting import poll_until

# mininet.log makes every logger created after its import a MininetLogger with a console
# handler of its own (logging.setLoggerClass): each of this project's lines would print twice.
logging.setLoggerClass(logging.Logger)

log = logging.getLogger(__name__)

DEFAULT_CPU_PORT = CPU_PORT
READY_TIMEOUT_S = 30.0
LOG_KEEP = 3  # previous switch logs kept: ice-NAME.log.1 .. ice-NAME.log.3


class SwitchStartError(RuntimeError):
    """A switch process did not come up (exited, or its gRPC port never opened)."""


def die_with_parent(cmd: list[str]) -> list[str]:
    """``cmd`` under ``setpriv --pdeathsig TERM`` (util-linux): it gets SIGTERM when the thread
    that started it ends, even by SIGKILL, where a session of its own would outlive it.

    The kernel ties the signal to the starting *thread*: start switches from the thread that
    holds the network (the bring-up's main thread). Without setpriv, ``cmd`` as it is."""
    exe = shutil.which("setpriv")
    if exe is None:
        log.warning("setpriv (util-linux) not found: switches will outlive a killed bring-up")
        return cmd
    return [exe, "--pdeathsig", "TERM", "--", *cmd]


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
            self.proc = self._spawn(die_with_parent(cmd), out)
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
            procs.append(self._spawn_quiet(die_with_parent(cmd)))
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
