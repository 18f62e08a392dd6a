"""Endpoint benchmark: ``python -m icefabric.experiment.bench`` (part of ``make bench``).

Three figures, each the best of ``--repeat`` runs:

* **endpoint code alone** (virtual time): one host's sender paces a flow at 100 Gbit/s and the
  receiver's ``receive`` takes every frame (build with struct, ICRC, parse, stats, message
  completion): packets per wall-clock second through sender + receiver, no switch.
* **virtual-time fabric**: two flows across the 2x4 leaf-spine of embedded ice.p4 switches
  (ICE agents, feedback on every packet, planned by nothing: flowlet paths), data packets
  delivered per wall-clock second, every packet crossing three P4 pipelines and returning
  feedback.
* **real-time host loop**: two :class:`RealTimeHost` loops (threads) on a Unix datagram socket
  pair, one flow at a 10 Gbit/s line rate (so pacing is not the limit): packets delivered per
  second; with root, also two hosts on a veth pair through AF_PACKET sockets.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import socket
import sys
import threading
import time
from pathlib import Path

from icefabric.control.cli.common import int_range

ROOT = Path(__file__).resolve().parents[1]


def endpoint_pps(packets: int) -> float:
    """Packets/s through one sender's poll and one receiver's receive (no network)."""
    from icefabric.traffic.agent import Agent
    from icefabric.traffic.endpoint import Endpoint

    a = Endpoint(
        Agent("h1", "10.0.1.1", line_rate_bps=100e9, kind="ice"),
        mac="02:00:00:00:00:01",
        gateway_mac="02:1c:e0:00:00:01",
    )
    b = Endpoint(
        Agent("h2", "10.0.2.1", line_rate_bps=100e9, kind="ice"),
        mac="02:00:00:00:00:02",
        gateway_mac="02:1c:e0:00:00:02",
    )
    key = a.open_flow(b.ip)
    a.post_send(key, packets * 1024, tag=1, now_us=0.0)
    got = 0
    t0 = time.perf_counter()
    t = a.next_send_us()
    while t is not None:
        for frame in a.poll(t):
            b.receive(t, frame)
            got += 1
        t = a.next_send_us()
    elapsed = time.perf_counter() - t0
    assert got == packets and b.rx_stats()[key].bytes_received == packets * 1024
    return got / elapsed


def virtual_pps(nbytes: int) -> tuple[float, int, float]:
    """(data packets delivered per wall second, packets, virtual seconds) on the 2x4 fabric."""
    from icefabric.control.controller import Controller
    from icefabric.control.fabric import FabricOptions
    from icefabric.control.p4rt import PipelineConfig
    from icefabric.experiment.virtual_fabric import VirtualConfig, VirtualFabric
    from icefabric.topo.spec import load_topology

    spec = load_topology(ROOT / "topo" / "examples" / "leaf_spine_2x4.yaml")
    pipeline = PipelineConfig.for_embedded(ROOT / "p4src" / "ice.p4")
    options = FabricOptions(
        mode="ice", feedback_every_n=1, report_every_n=0, flowlet_timeout_us=100_000
    )
    with VirtualFabric(spec, VirtualConfig(kind="ice")) as vf:
        ctl = Controller(
            spec, pipeline, addresses=vf.addresses, options=options, probe_interval_s=0
        )
        try:
            ctl.start()
            keys = [vf.open_flow("h1", "h3"), vf.open_flow("h2", "h6")]
            for i, k in enumerate(keys):
                vf.post(k, nbytes, tag=i)
            t0 = time.perf_counter()
            end = vf.run_until_idle(max_us=10**9)
            elapsed = time.perf_counter() - t0
        finally:
            ctl.stop()
        stats = vf.flow_stats()
        packets = sum(stats[k].packets_received for k in keys)
        assert all(stats[k].bytes_received == nbytes for k in keys)
    return packets / elapsed, packets, end / 1e6


def _host_pair(a_sock: socket.socket, b_sock: socket.socket, nbytes: int) -> tuple[float, float]:
    """(packets/s the receiver got, fraction lost) for one flow between two host loops."""
    from icefabric.traffic.agent import Agent
    from icefabric.traffic.endpoint import Endpoint
    from icefabric.traffic.realtime import RealTimeHost

    def host(name: str, ip: str, sock: socket.socket, expect: int) -> RealTimeHost:
        agent = Agent(name, ip, line_rate_bps=10e9, kind="ice")
        ep = Endpoint(
            agent, mac="02:00:00:00:00:01", gateway_mac="02:00:00:00:00:02", granularity_us=100.0
        )
        return RealTimeHost(ep, sock, expect_messages=expect)

    a = host("h1", "10.0.1.1", a_sock, 0)
    b = host("h2", "10.0.2.1", b_sock, 1)
    key = a.post("10.0.2.1", nbytes, tag=1)
    tb = threading.Thread(target=b.run, kwargs={"duration_s": 120, "linger_s": 0.0})
    ta = threading.Thread(target=a.run, kwargs={"duration_s": 120, "linger_s": 0.0})
    tb.start()
    ta.start()
    ta.join()
    tb.join(timeout=2.0)  # a lost last packet never completes the message: stop the receiver
    b.stop.set()
    tb.join()
    rx = b.endpoint.rx_stats()[key]
    span = (rx.last_rx_us or 0.0) - (rx.first_rx_us or 0.0)
    pps = rx.packets_received / (span / 1e6) if span > 0 else 0.0
    return pps, rx.psn_gap_losses / max(1, rx.packets_received + rx.psn_gap_losses)


def realtime_socketpair_pps(nbytes: int) -> tuple[float, float]:
    """Packets/s between two real-time host loops on a Unix datagram socket pair."""
    a_sock, b_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    for s in (a_sock, b_sock):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
    try:
        return _host_pair(a_sock, b_sock, nbytes)
    finally:
        a_sock.close()
        b_sock.close()


def realtime_veth_pps(nbytes: int) -> tuple[float, float] | None:
    """Packets/s between two real-time host loops on a veth pair (AF_PACKET); None without root."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return None
    from icefabric.target.ports import VethLab

    try:
        with VethLab(f"ice-bench-{os.getpid()}", pairs=1) as lab:
            a_sock, b_sock = lab.socket("h1"), lab.socket("s1")
            try:
                return _host_pair(a_sock, b_sock, nbytes)
            finally:
                a_sock.close()
                b_sock.close()
    except OSError as exc:
        logging.getLogger(__name__).warning("veth bench skipped: %s", exc)
        return None


def main(argv: list[str] | None = None) -> int:
    """Run the three measurements and print them."""
    ap = argparse.ArgumentParser(
        prog="python -m icefabric.experiment.bench", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--repeat", type=int_range(1, 100), default=3)
    ap.add_argument(
        "--packets",
        type=int_range(1, 10_000_000),
        default=20_000,
        help="endpoint-alone packets (default 20000)",
    )
    ap.add_argument(
        "--virtual-bytes",
        type=int_range(1, 1 << 30),
        default=500_000,
        help="bytes per flow in the virtual fabric",
    )
    ap.add_argument(
        "--realtime-bytes",
        type=int_range(1, 1 << 34),
        default=20_000_000,
        help="bytes of the real-time flow",
    )
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    ep = max(endpoint_pps(args.packets) for _ in range(args.repeat))
    sys.stdout.write(
        f"endpoint code alone (virtual time, sender poll + receiver): {ep:,.0f} packets/s\n"
    )
    best: tuple[float, int, float] = (0.0, 0, 0.0)
    for _ in range(args.repeat):
        r = virtual_pps(args.virtual_bytes)
        best = max(best, r)
    sys.stdout.write(
        f"virtual-time fabric (2x4 leaf-spine, ice.p4, 2 ICE flows, feedback per packet): "
        f"{best[0]:,.0f} data packets/s ({best[1]} packets, {best[2] * 1e3:.0f} ms virtual)\n"
    )
    rt = max(realtime_socketpair_pps(args.realtime_bytes) for _ in range(args.repeat))
    sys.stdout.write(
        f"real-time host loops, Unix datagram socket pair: {rt[0]:,.0f} packets/s received "
        f"({rt[1]:.1%} lost)\n"
    )
    veth = realtime_veth_pps(args.realtime_bytes)
    if veth is None:
        sys.stdout.write("real-time host loops, veth + AF_PACKET: skipped (needs root and `ip`)\n")
    else:
        sys.stdout.write(
            f"real-time host loops, veth + AF_PACKET, 10 Gbit/s offered: {veth[0]:,.0f} packets/s "
            f"received ({veth[1]:.1%} lost)\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
