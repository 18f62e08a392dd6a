"""Mininet bring-up from a topology spec, with P4Runtime switch classes for both targets.

Each switch is a user-space process in the root namespace that serves P4Runtime on
``127.0.0.1:<grpc_port>`` and owns the switch's veth interfaces as ``-i PORT@IFACE``:

* :class:`ICESwitch` runs the embedded target, ``ice-switch`` (this project, no toolchain needed);
* :class:`BMv2Switch` runs BMv2's ``simple_switch_grpc`` (when it is installed).

Neither needs Open vSwitch. The switches start with no pipeline unless a P4 program (or, for
BMv2, p4c's JSON) is given; the controller (``icectl run``) pushes it over P4Runtime.

Hosts get their address and MAC from the spec and an on-link default route: they ARP for every
destination and the leaf answers from its controller-filled ARP table.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mininet.net import Mininet
from mininet.node import Switch

from icefabric.topo.spec import SpecError, TopologySpec, load_topology

log = logging.getLogger(__name__)

TARGETS = ("embedded", "bmv2")
DEFAULT_CPU_PORT = 255
READY_TIMEOUT_S = 30.0


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
    while True:
        if proc is not None and proc.poll() is not None:
            raise SwitchStartError(f"switch process exited with status {proc.returncode}")
        try:
            with socket.create_connection((addr, port), timeout=0.2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise SwitchStartError(f"no P4Runtime server on {addr}:{port}") from None
            time.sleep(0.05)


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

    def __init__(self, name: str, **params: Any) -> None:
        p4rt = {k: params.pop(k) for k in list(params) if k in _P4RT_PARAMS}
        params["inNamespace"] = False  # a user-space process on root-namespace veths
        super().__init__(name, **params)  # type: ignore[call-arg]  # Mininet Switch
        self._init_p4rt(**p4rt)

    def _init_p4rt(
        self,
        *,
        grpc_port: int,
        device_id: int,
        cpu_port: int = DEFAULT_CPU_PORT,
        log_dir: str = "/tmp",
        program: str | None = None,
        extra_args: Sequence[str] = (),
        priority_queues: int = 1,
    ) -> None:
        self.grpc_port = grpc_port
        # --priority-queues: from the topology spec, which the controller reads too (it raises
        # control traffic to the top queue only when there is one; BMv2 drops above it).
        self.priority_queues = priority_queues
        self.device_id = device_id
        self.cpu_port = cpu_port
        self.program = program
        self.extra_args = list(extra_args)
        self.log_path = Path(log_dir) / f"ice-{self.name}.log"
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
                subprocess.run(
                    ["ethtool", "-K", intf.name, "rx", "off", "tx", "off", "sg", "off"],
                    capture_output=True,
                    check=False,
                )
        cmd = self.command()
        log.info("%s: %s", self.name, " ".join(cmd))
        with self.log_path.open("wb") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_for_port(
                "127.0.0.1", self.grpc_port, time.monotonic() + READY_TIMEOUT_S, self.proc
            )
        except SwitchStartError as e:
            raise SwitchStartError(
                f"{self.name}: {e}; log {self.log_path}:\n{_tail(self.log_path)}"
            ) from e

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
    """BMv2's ``simple_switch_grpc`` on this switch's veth interfaces."""

    def command(self) -> list[str]:
        exe = shutil.which("simple_switch_grpc")
        if exe is None:
            raise SwitchStartError("simple_switch_grpc is not on PATH (install BMv2)")
        cmd = [exe, *self.port_args(), "--device-id", str(self.device_id)]
        cmd += [self.program] if self.program else ["--no-p4"]
        cmd += ["--", "--grpc-server-addr", f"127.0.0.1:{self.grpc_port}"]
        cmd += ["--cpu-port", str(self.cpu_port)]
        cmd += ["--priority-queues", str(self.priority_queues)]  # a target option: after "--"
        return cmd + self.extra_args


_P4RT_PARAMS = (
    "grpc_port",
    "device_id",
    "cpu_port",
    "log_dir",
    "program",
    "extra_args",
    "priority_queues",
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
    log_dir: str = "/tmp",
    switch_args: Sequence[str] = (),
) -> Any:
    """A (not yet started) Mininet network for ``spec``: hosts, P4 switches, links by port."""
    cls = switch_class(target)
    net = Mininet(controller=None, build=False, autoSetMacs=False, autoStaticArp=False)
    for sw in spec.switches:
        net.addSwitch(
            sw.name,
            cls=cls,
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


def start_network(spec: TopologySpec, **kwargs: Any) -> Any:
    """Build and start the network for ``spec``; stops what started if any switch fails."""
    net = build_network(spec, **kwargs)
    try:
        net.build()
        net.start()
        configure_hosts(net, spec)
    except Exception:
        net.stop()
        raise
    return net


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
    parser.add_argument("--log-dir", default="/tmp", help="switch logs: LOG_DIR/ice-NAME.log")
    parser.add_argument("--no-cli", action="store_true", help="start, print the net, then stop")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if os.geteuid() != 0:
        print("error: Mininet needs root (network namespaces and veth pairs)", file=sys.stderr)
        return 2
    try:
        spec = load_topology(args.topo)
    except (OSError, SpecError) as e:
        print(f"error: {e}", file=sys.stderr)
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
    try:
        for sw in spec.switches:
            print(f"{sw.name}: P4Runtime 127.0.0.1:{sw.grpc_port} device_id {sw.device_id}")
        if not args.no_cli:
            from mininet.cli import CLI

            CLI(net)
    finally:
        net.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
