"""The real-time host: one RoCEv2 endpoint + rate agent on an AF_PACKET socket.

``icefabric-host`` (or ``python -m icefabric.traffic.host``) runs in a Mininet host or network
namespace.  It sends RoCEv2 messages paced by the host's rate agent (DCQCN or ICE), answers
CE-marked packets with CNPs, feeds ICE feedback and CNPs to the agent, and, given a controller
address, reports its flows' real keys and applies the caps it receives over the agent channel
(:class:`icefabric.control.agents.client.AgentClient`, which reconnects with backoff).  The
endpoint and agent are the same classes the virtual-time engine drives; only the clock
(``time.monotonic``) and the wire (a raw socket) differ.

Work comes from ``--flow DST_IP:BYTES`` (one message per flow) or ``--schedule FILE`` (a
collective's dependency schedule, :class:`icefabric.traffic.workload.Schedule` as JSON, of which
this host runs its share: message ids are the tags).  The process ends when its work is done
(own messages sent and, for a schedule, every message to it arrived; ``--expect N`` waits for N
messages), at ``--duration``, or on SIGINT/SIGTERM; ``--stats FILE`` then gets its figures.

Inside a Mininet host started by ``python -m icefabric.topo.mininet`` it needs no options but its
work: the interface is the namespace's only one, the topology comes from ``$ICE_TOPOLOGY`` and
the host is the one whose address the interface holds (``--host`` takes a name or an address:
the Mininet CLI turns every node name into its IP), the controller is the default agent socket
when it exists, and the pace is the smaller of the topology's host rate and what the switch
target (``$ICE_TARGET``) forwards without loss (``hostconfig.TARGET_PACE_BPS``). At exit it
prints one summary line per flow (bytes, time, goodput, loss, rate, cap, path) and exits 1 when
a message sent to it arrived with a packet missing or stopped before its last packet (silent
for ``realtime.STALL_S``, 10 s: given up rather than waited for ever) (``--flow``/``--expect``
work).

The loop is :class:`~icefabric.traffic.realtime.RealTimeHost`; the options are resolved in
:mod:`icefabric.traffic.hostconfig`; this module is the command line that joins them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from icefabric.traffic.agent import Agent
from icefabric.traffic.endpoint import DEFAULT_MTU, Endpoint
from icefabric.traffic.hostconfig import (
    HostConfig,
    UsageError,
    default_controller,
    load_schedule,
    resolve,
    resolve_flow,
)
from icefabric.traffic.rate import DcqcnParams, rate_kinds
from icefabric.traffic.realtime import RealTimeHost, outcome

if TYPE_CHECKING:
    from icefabric.control.agents.client import AgentClient

log = logging.getLogger("icefabric.traffic.host")

FLOW_SETUP_S = 2.0  # --flow with a controller: wait this long for its cap before sending


def build_parser() -> argparse.ArgumentParser:
    """The ``icefabric-host`` command line."""
    ap = argparse.ArgumentParser(
        prog="icefabric-host",
        description=(
            "Run one RoCEv2 host (endpoint + rate agent) on a network interface: send messages "
            "paced by DCQCN or ICE, answer ECN marks with CNPs, report real flow keys to the ICE "
            "controller and obey its caps. Needs CAP_NET_RAW (root) for the AF_PACKET socket."
        ),
        epilog=(
            "examples:\n"
            "  mininet> h3 icefabric-host --expect 1 &        # in the Mininet CLI: all defaults\n"
            "  mininet> h1 icefabric-host --flow h3:1000000\n"
            "  icefabric-host --iface h2-eth0 --ip 10.0.2.1 --gateway-mac 02:1c:e0:00:00:02 --expect 1\n"
            "  icefabric-host --iface h1-eth0 --ip 10.0.1.1 --gateway-mac 02:1c:e0:00:00:01 \\\n"
            "      --flow 10.0.2.1:1000000 --kind ice --line-rate 100M --rate-scale 1e-3 \\\n"
            "      --controller /run/icefabric/icectl-agents.sock --stats h1.json\n"
            "  icefabric-host --topology topo.yaml --host h1 --iface h1-eth0 --schedule s.json\n"
            "exit codes: 0 done, 1 runtime failure or a message that arrived with packets "
            "missing (or without its last packet: given up after 10 s), 2 bad options or "
            "input files"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--iface",
        help="network interface to send and receive on (default: the namespace's only one)",
    )
    ap.add_argument(
        "--topology",
        type=Path,
        default=Path(os.environ["ICE_TOPOLOGY"]) if os.environ.get("ICE_TOPOLOGY") else None,
        help="topology spec: fills --ip/--mac/--gateway-mac/--line-rate from --host "
        "(default: $ICE_TOPOLOGY, which the Mininet bring-up sets)",
    )
    ap.add_argument(
        "--host",
        help="this host: its name or address in the topology (default: the host whose address "
        "the interface holds); reported to the controller",
    )
    ap.add_argument("--ip", help="this host's IPv4 address")
    ap.add_argument("--mac", help="this host's MAC (default: the interface's)")
    ap.add_argument("--gateway-mac", help="MAC to send to (the leaf's router MAC, or the peer's)")
    ap.add_argument(
        "--line-rate",
        default=None,
        help="NIC rate, bit/s (100M, 10G ...); default: the topology's host rate x --rate-scale "
        "when that is given, else the smaller of the topology's rate and the pace $ICE_TARGET's "
        "switches take without loss (embedded 5M, bmv2 20M)",
    )
    ap.add_argument(
        "--rate-scale",
        type=float,
        default=None,
        help="factor between the topology's link rates and the switches' queue rates (INT link "
        "rates are multiplied by it); default 1",
    )
    ap.add_argument(
        "--kind", choices=rate_kinds(), default="ice", help="rate algorithm (default ice)"
    )
    ap.add_argument(
        "--base-rtt-us",
        type=float,
        help="ICE's base RTT T in us (default: scaled from 9 us at 100G)",
    )
    ap.add_argument(
        "--mtu",
        type=int,
        default=DEFAULT_MTU,
        help=f"RoCE payload bytes per packet (default {DEFAULT_MTU})",
    )
    ap.add_argument("--seed", type=int, default=0, help="seeds the QP numbering (default 0)")
    ap.add_argument(
        "--flow",
        action="append",
        default=[],
        type=str,
        metavar="DST:BYTES",
        help="send one message of BYTES to DST (an IP, or a host name with --topology) on a new "
        "QP (repeatable)",
    )
    ap.add_argument(
        "--schedule",
        type=Path,
        help="a workload schedule (JSON, Schedule.to_dict) of which this host runs its share; needs --topology and --host",
    )
    ap.add_argument(
        "--expect", type=int, default=0, metavar="N", help="also wait until N messages arrived"
    )
    ap.add_argument(
        "--start-at",
        type=float,
        help="start sending at this wall-clock time (time.time()), to start hosts together",
    )
    ap.add_argument(
        "--linger",
        type=float,
        default=0.2,
        metavar="S",
        help="stay this long after the work is done (late CNPs, feedback; the controller keeps "
        "seeing the agent); default 0.2",
    )
    ap.add_argument("--duration", type=float, help="stop after this many seconds")
    ap.add_argument(
        "--controller",
        action="append",
        default=[],
        metavar="ADDR",
        help="controller's agent channel: a Unix socket path or tcp:HOST:PORT (repeat for a "
        "backup); default: icectl run's default agent socket when it exists; 'off': none",
    )
    ap.add_argument(
        "--controller-store",
        metavar="URL",
        help="etcd://HOST:2379[,...] where controller replicas publish their agent channels: "
        "the agent follows the primary (needs --topology-name)",
    )
    ap.add_argument(
        "--topology-name", help="with --controller-store: the topology's name (its spec's name:)"
    )
    ap.add_argument(
        "--token-file",
        type=Path,
        help="file holding this host's agent token (TCP; icectl agent-token HOST)",
    )
    ap.add_argument(
        "--stats", type=Path, help="write the host's figures here as JSON (mode 0600) at exit"
    )
    ap.add_argument(
        "-v", "--verbose", action="store_true", help="log every message and connection event"
    )
    ap.add_argument("-q", "--quiet", action="store_true", help="no summary lines (exit code only)")
    import icefabric

    ap.add_argument("--version", action="version", version=f"%(prog)s {icefabric.__version__}")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``icefabric-host``."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    try:
        cfg = resolve(args)
        flows = [resolve_flow(f, cfg.host_names) for f in args.flow]
        schedule = None
        if args.schedule is not None:
            if args.topology is None:
                raise UsageError("--schedule needs --topology")
            schedule = load_schedule(args.schedule)
        if args.mtu < 64 or args.mtu > 9000:
            raise UsageError(f"--mtu {args.mtu}: expected 64..9000")
        token = None
        if args.token_file is not None:
            from icefabric.control.agents.auth import read_token

            try:  # this host's token (icectl agent-token HOST), a file only its owner reads
                token = read_token(args.token_file)
            except ValueError as exc:
                raise UsageError(f"--token-file: {exc}") from None
        endpoint = _endpoint(args, cfg)
    except (UsageError, ValueError) as exc:
        print(f"icefabric-host: {exc}", file=sys.stderr)
        return 2
    try:
        from icefabric.target.ports import open_raw_socket

        sock = open_raw_socket(cfg.iface)
    except OSError as exc:
        print(f"icefabric-host: --iface {cfg.iface}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    host = RealTimeHost(endpoint, sock, expect_messages=args.expect)
    try:
        client = _agent_client(args, cfg.name, token, host)
    except ValueError as exc:
        print(f"icefabric-host: --controller: {exc}", file=sys.stderr)
        sock.close()
        return 2
    if client is not None:
        client.start()
        host.controller = client
    if schedule is not None:
        _take_share(host, schedule, args.topology, cfg.name)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: host.stop.set())
    log.info("%s ready on %s (%s, %s)", cfg.name, cfg.iface, cfg.ip, args.kind)
    if args.start_at is not None:
        host.stop.wait(max(0.0, args.start_at - time.time()))
    keys = [host.open_flow(f.dst_ip) for f in flows]  # reported to the controller at once
    # As a CCL connects its QPs before it sends: give the controller the time to bind the flows
    # to planned ones and install their paths (it then caps them); a path that changed under a
    # running flow reorders it, which RoCE counts as loss.
    if client is not None and keys and client.wait_connected(FLOW_SETUP_S):
        host.wait_for_cap(keys, FLOW_SETUP_S)
    for i, (f, key) in enumerate(zip(flows, keys, strict=True)):
        host.endpoint.post_send(key, f.nbytes, i + 1, now_us=host.now_us())
        host.posted_bytes[key] = host.posted_bytes.get(key, 0) + f.nbytes
    rc: int = 0
    try:
        host.run(duration_s=args.duration, linger_s=args.linger)
        rc, why = outcome(host, scheduled=schedule is not None)
        if why:
            print(f"icefabric-host: {cfg.name}: {why}", file=sys.stderr)
        if not args.quiet:
            for line in host.summary_lines(cfg.host_names, cfg.switch_names, cfg.rate_note):
                print(line, flush=True)
    finally:
        if client is not None:
            with contextlib.suppress(Exception):
                client.report_flows(host.agent.flow_reports())
            client.close()
        sock.close()
        if args.stats is not None:
            _write_stats(args.stats, host.stats())
    return rc


def _endpoint(args: argparse.Namespace, cfg: HostConfig) -> Endpoint:
    """This host's rate agent and RoCEv2 endpoint, as the options and topology say."""
    agent = Agent(
        cfg.name,
        cfg.ip,
        line_rate_bps=cfg.line_rate_bps,
        kind=args.kind,
        base_rtt_us=args.base_rtt_us,
        seed=args.seed,
    )
    return Endpoint(
        agent,
        mac=cfg.mac,
        gateway_mac=cfg.gateway_mac,
        mtu=args.mtu,
        cnp_interval_us=DcqcnParams().scaled(cfg.line_rate_bps).cnp_interval_us,
        link_rate_scale=cfg.rate_scale,
        granularity_us=100.0,
    )


def _agent_client(
    args: argparse.Namespace, name: str, token: str | None, host: RealTimeHost
) -> AgentClient | None:
    """The agent channel to the controller (--controller, --controller-store, or the default
    socket when it exists), not yet started; None without one. ValueError: a bad address."""
    if not args.controller and not args.controller_store:
        args.controller = default_controller()
    args.controller = [c for c in (args.controller or []) if c != "off"]
    if not (args.controller or args.controller_store):
        return None
    from icefabric.control.agents.client import AgentClient

    discover = None
    addresses = list(args.controller or [])
    if args.controller_store:
        from icefabric.control.store.etcd import agent_discovery

        if not args.topology_name:
            raise ValueError("--controller-store needs --topology-name")
        discover = agent_discovery(args.controller_store, args.topology_name)
        try:
            addresses = discover() or addresses
        except Exception as exc:  # etcd down at start: the given addresses, or fail
            if not addresses:
                raise ValueError(f"--controller-store: {exc}") from None
    if not addresses:
        raise ValueError("no controller address (none published in etcd yet?)")
    return AgentClient(
        addresses,
        name,
        token=token,
        on_caps=host.on_caps,
        on_starts=host.on_starts,
        discover=discover,
    )


def _take_share(host: RealTimeHost, schedule: Any, topology: Path, name: str) -> None:
    """Run this host's share of ``schedule``: its QPs opened (and reported) up front, so the
    controller can install the real keys before the first message."""
    from icefabric.topo.spec import load_topology
    from icefabric.traffic.workload import WorkloadExecutor

    spec = load_topology(topology)
    ips = {h.name: h.address for h in spec.hosts}

    def post(m: Any, _now: float) -> None:
        host.post(ips[m.dst_host], m.nbytes, m.id, job=schedule.job, flow_id=m.flow_id or "")

    host.executor = WorkloadExecutor(schedule=schedule, post=post, host=name)
    for m in schedule.messages:
        if m.src_host == name and m.flow_id is not None:
            host.open_flow(ips[m.dst_host], job=schedule.job, flow_id=m.flow_id)


def _write_stats(path: Path, data: dict[str, Any]) -> None:
    from icefabric.files import write_output

    write_output(path, json.dumps(data, indent=1, default=str), mode=0o600)


if __name__ == "__main__":
    raise SystemExit(main())
