"""Packets per second through a 3-table IPv4 forwarding pipeline: in-process and over veth.

Run: python -m icefabric.target.bench [--packets N] [--no-veth]
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from icefabric.target.device import Device
from icefabric.target.ports import MAX_FRAME
from icefabric.target.runtime import ActionCall, Match, TableEntry

PROGRAM = Path(__file__).with_name("bench_programs") / "forward3.p4"
N_ROUTES = 256

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Result:
    """One benchmark row."""

    name: str
    packets: int
    seconds: float
    received: int
    note: str = ""

    @property
    def pps(self) -> float:
        """Packets per second delivered."""
        return self.received / self.seconds if self.seconds > 0 else 0.0


def ipv4_packet(dst: int, src: int = 0x0A000001, ttl: int = 64, payload: int = 64) -> bytes:
    """An Ethernet/IPv4/UDP-ish frame with a correct header checksum."""
    total = 20 + payload
    hdr = struct.pack("!BBHHHBBHII", 0x45, 0, total, 1, 0, ttl, 17, 0, src, dst)
    s = sum(struct.unpack("!10H", hdr))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    hdr = hdr[:10] + struct.pack("!H", ~s & 0xFFFF) + hdr[12:]
    eth = bytes.fromhex("00aabbccddee0011223344550800")
    return eth + hdr + bytes(payload)


def populate(pipeline: Any, ports: tuple[int, ...] = (1, 2)) -> None:
    """Install port->vrf, N_ROUTES /24 routes and one next hop per route."""
    t_vrf = pipeline.tables["MyIngress.port_vrf"]
    t_routes = pipeline.tables["MyIngress.routes"]
    t_nhops = pipeline.tables["MyIngress.nhops"]
    for port in range(16):
        t_vrf.insert(TableEntry((Match.exact(port),), action=ActionCall("MyIngress.set_vrf", (1,))))
    for i in range(N_ROUTES):
        dst = 0x0B000000 | (i << 8)
        t_routes.insert(
            TableEntry(
                (Match.exact(1), Match.lpm(dst, 24)),
                action=ActionCall("MyIngress.set_nhop", (i + 1,)),
            )
        )
        out = ports[i % len(ports)]
        t_nhops.insert(
            TableEntry(
                (Match.exact(i + 1),),  # next hop 0 = "no route": must miss
                action=ActionCall("MyIngress.rewrite", (0x0000000000A0 + i, 0x00000000FF00, out)),
            )
        )


def make_device(program: Any) -> Device:
    """A device running the bench program with its tables filled."""
    dev = Device(device_id=0)
    dev.set_program(program)
    populate(dev.pipeline)
    return dev


def bench_in_process(program: Any, n: int) -> Result:
    """Inject n packets on port 1 and process them with run_until_idle."""
    dev = make_device(program)
    packets = [ipv4_packet(0x0B000000 | ((i % N_ROUTES) << 8) | 7) for i in range(256)]
    for p in packets[:50]:  # warm up (builds lookup structures)
        dev.inject(1, p)
    dev.run_until_idle()
    dev.collect()
    start = time.perf_counter()
    for i in range(n):
        dev.inject(1, packets[i & 255])
        if i & 63 == 63:
            dev.run_until_idle()
    dev.run_until_idle()
    seconds = time.perf_counter() - start
    received = len(dev.collect())
    return Result("in-process (inject/run_until_idle)", n, seconds, received)


def bench_veth(program: Any, n: int) -> Result:
    """Send n packets through a veth pair into the switch and count what comes out."""
    if os.geteuid() != 0:
        return Result("veth (AF_PACKET)", 0, 0.0, 0, "skipped: needs root")
    if shutil.which("ip") is None:
        return Result("veth (AF_PACKET)", 0, 0.0, 0, "skipped: no `ip` command")
    try:
        return _veth_run(program, n)
    except OSError as exc:
        return Result("veth (AF_PACKET)", 0, 0.0, 0, f"skipped: {exc}")


def _veth_run(program: Any, n: int) -> Result:
    from icefabric.target.ports import RawPort, VethLab

    with VethLab(f"icebench-{os.getpid()}", pairs=2) as lab:
        dev = Device(device_id=0)
        dev.set_program(program)
        populate(dev.pipeline, ports=(2,))
        ports = [RawPort(p, f"s{p}", dev, sock=lab.socket(f"s{p}")) for p in (1, 2)]
        for rp in ports:
            dev.attach_port(rp.port, rp.send)
        tx = lab.socket("h1")
        rx = lab.socket("h2")
        rx.settimeout(0.5)
        dev.start()
        for rp in ports:
            rp.start()
        received = 0
        done = threading.Event()

        def count() -> None:
            nonlocal received
            while not done.is_set():
                try:
                    rx.recv(MAX_FRAME)
                except OSError:
                    continue
                received += 1
                if received >= n:
                    done.set()

        counter = threading.Thread(target=count, daemon=True)
        counter.start()
        packets = [ipv4_packet(0x0B000000 | ((i % N_ROUTES) << 8) | 7) for i in range(256)]
        start = time.perf_counter()
        for i in range(n):
            tx.send(packets[i & 255])
            while dev.backlog() > 256:  # pace the sender so socket buffers do not overflow
                time.sleep(0.0005)
        done.wait(timeout=30 + n / 1000)
        seconds = time.perf_counter() - start
        done.set()
        counter.join(2)
        for rp in ports:
            rp.close()
        dev.stop()
        tx.close()
        rx.close()
        note = "" if received == n else f"{n - received} lost"
        return Result("veth (AF_PACKET, real-time threads)", n, seconds, received, note)


def format_table(rows: list[Result]) -> str:
    """A small text table of results."""
    lines = [f"{'path':<38} {'sent':>8} {'received':>9} {'seconds':>8} {'pkt/s':>9}  note"]
    for r in rows:
        lines.append(
            f"{r.name:<38} {r.packets:>8} {r.received:>9} {r.seconds:>8.3f} {r.pps:>9.0f}  {r.note}"
        )
    return "\n".join(lines)


def _packets(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not 1 <= value <= 10_000_000:
        raise argparse.ArgumentTypeError(f"expected >= 1 and <= 10,000,000, got {text!r}")
    return value


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print a table."""
    ap = argparse.ArgumentParser(prog="python -m icefabric.target.bench", description=__doc__)
    ap.add_argument(
        "--packets", type=_packets, default=20000, help="packets per measurement (default 20000)"
    )
    ap.add_argument("--no-veth", action="store_true", help="skip the veth measurement")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    from icefabric.target.compiler import load_program

    program = load_program(PROGRAM)
    rows = [bench_in_process(program, args.packets)]
    if not args.no_veth:
        rows.append(bench_veth(program, min(args.packets, 5000)))
    print(
        f"program: {PROGRAM.name} (3 tables: exact, exact+lpm, exact; csum16 update), {N_ROUTES} routes"
    )
    print(format_table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
