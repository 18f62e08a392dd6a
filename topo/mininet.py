"""Mininet bring-up from a topology spec, with P4Runtime switch classes for both targets.

A network of the P4Runtime switch classes of :mod:`icefabric.topo.switches`
(:class:`~icefabric.topo.switches.ICESwitch` for the embedded target,
:class:`~icefabric.topo.switches.BMv2Switch` for BMv2) with the spec's hosts and links.
Neither needs Open vSwitch. The switches start with no pipeline unless a P4 program (or, for
BMv2, p4c's JSON) is given; the controller (``icectl run``) pushes it over P4Runtime.

Hosts get their address and MAC from the spec and an on-link default route: they ARP for every
destination and the leaf answers from its controller-filled ARP table.

Switch processes run in sessions of their own, so Ctrl-C at ``mininet>`` never reaches them;
:class:`SwitchWatch` prints one line in the CLI as soon as one exits. ``--pcap DIR`` records
every switch port with ``tcpdump`` (``DIR/IFACE.pcap``), as p4-utils' ``pcap_dump`` does.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mininet.net import Mininet

from icefabric.topo.spec import SpecError, TopologySpec, load_topology
from icefabric.topo.switches import (
    DEFAULT_CPU_PORT,
    READY_TIMEOUT_S,
    BMv2Switch,
    ICESwitch,
    SwitchStartError,
)
from icefabric.waiting import Deadline

# mininet.log makes every logger created after its import a MininetLogger with a console
# handler of its own (logging.setLoggerClass): each of this project's lines would print twice.
logging.setLoggerClass(logging.Logger)

log = logging.getLogger(__name__)

TARGETS = ("embedded", "bmv2")
WATCH_INTERVAL_S = 0.2


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
    deadline = Deadline(timeout_s)
    fd = proc.stdout.fileno()
    while marker not in seen and not deadline.expired:
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
