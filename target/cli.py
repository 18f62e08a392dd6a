"""ice-switch: the embedded P4 switch with simple_switch_grpc's command line."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from icefabric.files import read_input, write_output
from icefabric.target.compiler.program import MAX_SOURCE_BYTES
from icefabric.target.device import Device
from icefabric.target.ports import RawPort, parse_port_spec
from icefabric.target.queues import MAX_PRIORITY_QUEUES
from icefabric.waiting import wait_until_stopped

log = logging.getLogger("icefabric.target.cli")

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


class CliError(Exception):
    """A user-facing error: message printed, exit code returned."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (options shaped like simple_switch_grpc's)."""
    ap = argparse.ArgumentParser(
        prog="ice-switch",
        description="Embedded P4_16 v1model software switch serving P4Runtime (no p4c/BMv2 needed).",
        epilog="exit codes: 0 ok, 1 runtime failure (an interface or address that cannot be "
        "opened), 2 usage error or a P4 program that is missing or does not compile",
    )
    ap.add_argument("program", nargs="?", help="P4 source file to load at start (same as --p4)")
    ap.add_argument(
        "-i",
        "--interface",
        action="append",
        default=[],
        metavar="PORT@IFACE",
        help="attach Linux interface IFACE as switch port PORT (repeatable)",
    )
    ap.add_argument("--device-id", type=int, default=0, help="P4Runtime device id (default 0)")
    ap.add_argument(
        "--grpc-server-addr",
        default="127.0.0.1:9559",
        help="P4Runtime listen address HOST:PORT or unix:PATH (default 127.0.0.1:9559)",
    )
    ap.add_argument(
        "--cpu-port", type=int, default=None, help="port number of the CPU port (packet-in/out)"
    )
    ap.add_argument("--p4", type=Path, default=None, help="P4 source file to load at start")
    ap.add_argument(
        "-I",
        "--include",
        action="append",
        type=Path,
        default=[],
        metavar="DIR",
        help="extra #include directory for --p4",
    )
    ap.add_argument(
        "--p4info-out",
        type=Path,
        default=None,
        help="write the program's P4Info (text) here; with no -i, write and exit",
    )
    ap.add_argument(
        "--queue-rate",
        action="append",
        default=[],
        metavar="[PORT:]PPS",
        help="egress queue drain rate in packets/s, all ports or one (repeatable)",
    )
    ap.add_argument(
        "--queue-rate-bps",
        action="append",
        default=[],
        metavar="[PORT:]BPS",
        help="egress queue drain rate in bits/s, all ports or one (repeatable)",
    )
    ap.add_argument(
        "--queue-depth",
        action="append",
        default=[],
        metavar="[PORT:]N",
        help="egress queue capacity in packets (default 64, as BMv2)",
    )
    ap.add_argument(
        "--priority-queues",
        type=int,
        default=1,
        metavar="N",
        help="strict-priority egress queues per port, selected by standard_metadata.priority "
        "(N-1 served first; a priority >= N is dropped), as simple_switch (default 1)",
    )
    ap.add_argument(
        "--queue-priority-rate",
        action="append",
        default=[],
        metavar="PORT:PRIO:PPS",
        help="drain rate of one priority queue of a port in packets/s (repeatable)",
    )
    ap.add_argument("--log-console", action="store_true", help="log to the console (stderr)")
    ap.add_argument("--log-file", type=Path, default=None, help="also log to this file")
    ap.add_argument(
        "--log-level",
        default=None,
        choices=["trace", "debug", "info", "warn", "warning", "error", "critical", "off"],
        help="log level (default info with --log-console, else warning)",
    )
    ap.add_argument("--no-p4", action="store_true", help="accepted for compatibility (the default)")
    ap.add_argument(
        "--thrift-port", type=int, default=None, help="accepted and ignored (no Thrift)"
    )
    return ap


def _port_value(spec: str, what: str) -> tuple[int | None, int]:
    port_s, sep, value_s = spec.rpartition(":")
    try:
        value = int(value_s)
        port = int(port_s) if sep else None
    except ValueError:
        raise CliError(f"--{what} {spec!r}: expected [PORT:]NUMBER", EXIT_USAGE) from None
    if value < 0 or (port is not None and not 0 <= port < 511):
        raise CliError(f"--{what} {spec!r}: out of range", EXIT_USAGE)
    return port, value


def _port_prio_value(spec: str, queues: int) -> tuple[int, int, int]:
    parts = spec.split(":")
    try:
        port, prio, value = (int(x) for x in parts) if len(parts) == 3 else (None, None, None)
    except ValueError:
        port = None
    if port is None or prio is None or value is None:
        raise CliError(f"--queue-priority-rate {spec!r}: expected PORT:PRIORITY:PPS", EXIT_USAGE)
    if value < 0 or not 0 <= port < 511 or not 0 <= prio < queues:
        raise CliError(
            f"--queue-priority-rate {spec!r}: out of range (port 0..510, priority "
            f"0..{queues - 1} with --priority-queues {queues})",
            EXIT_USAGE,
        )
    return port, prio, value


SHUTDOWN_GRACE_S = 5.0  # after SIGTERM/SIGINT, the longest an orderly shutdown may take


def _level(name: str | None, console: bool) -> int:
    if name is None:
        return logging.INFO if console else logging.WARNING
    return {
        "trace": logging.DEBUG,
        "debug": logging.DEBUG,
        "info": logging.INFO,
        "warn": logging.WARNING,
        "warning": logging.WARNING,
        "error": logging.ERROR,
        "critical": logging.CRITICAL,
        "off": logging.CRITICAL + 10,
    }[name]


def load(path: Path, include: list[Path]) -> Any:
    """Compile a P4 file; CliError with the compiler's message on failure."""
    from icefabric.target.compiler import load_program
    from icefabric.target.p4.errors import P4CompileError

    if path.suffix == ".json":
        raise CliError(f"{path}: BMv2 JSON is not supported; pass the P4 source file", EXIT_USAGE)
    if not path.is_file():
        raise CliError(f"{path}: no such file", EXIT_USAGE)
    try:
        return load_program(path, include_dirs=include)
    except P4CompileError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    except UnicodeDecodeError as exc:
        raise CliError(
            f"{path}: not UTF-8 text (byte {exc.start}): expected P4_16 source", EXIT_USAGE
        ) from None


def run(args: argparse.Namespace, stop: threading.Event) -> int:
    """Start the switch described by `args` and serve until `stop` is set."""
    from icefabric.target.bundle import BundleError, make_bundle
    from icefabric.target.server import serve

    if args.program and args.p4 and Path(args.program) != args.p4:
        raise CliError(
            "give the P4 program either as an argument or with --p4, not both", EXIT_USAGE
        )
    p4file = args.p4 or (Path(args.program) if args.program else None)
    specs = [parse_port_spec_cli(s) for s in args.interface]
    seen: set[int] = set()
    for port, _ in specs:
        if port in seen:
            raise CliError(f"port {port} is given twice with -i", EXIT_USAGE)
        if args.cpu_port is not None and port == args.cpu_port:
            raise CliError(
                f"port {port} is the CPU port; it cannot also be an interface", EXIT_USAGE
            )
        seen.add(port)
    if not 0 <= args.device_id < 1 << 64:
        raise CliError(f"--device-id {args.device_id}: must be in [0, 2^64 - 1]", EXIT_USAGE)
    check_grpc_addr(args.grpc_server_addr)
    if args.cpu_port is not None and not 0 <= args.cpu_port < 511:
        raise CliError(f"--cpu-port {args.cpu_port}: must be in [0, 510]", EXIT_USAGE)
    program = load(p4file, args.include) if p4file else None
    if args.p4info_out is not None:
        if program is None:
            raise CliError("--p4info-out needs a program (--p4 FILE)", EXIT_USAGE)
        try:
            write_output(args.p4info_out, program.p4info_text())
        except OSError as exc:
            raise CliError(f"cannot write {args.p4info_out}: {exc}") from None
        log.info("P4Info written to %s", args.p4info_out)
        if not specs:
            return EXIT_OK
    if not 1 <= args.priority_queues <= MAX_PRIORITY_QUEUES:
        raise CliError(
            f"--priority-queues {args.priority_queues}: must be in [1, {MAX_PRIORITY_QUEUES}]",
            EXIT_USAGE,
        )
    device = Device(
        device_id=args.device_id, cpu_port=args.cpu_port, priority_queues=args.priority_queues
    )
    device.collect_limit = 0  # a port without an interface drops (counted as unknown_port)
    for spec in args.queue_rate:
        qport, pps = _port_value(spec, "queue-rate")
        device.set_queue_rate(qport, pps=pps or None)
    for spec in args.queue_rate_bps:
        qport, bps = _port_value(spec, "queue-rate-bps")
        device.set_queue_rate(qport, bps=bps or None)
    for spec in args.queue_depth:
        qport, depth = _port_value(spec, "queue-depth")
        if depth < 1:
            raise CliError(f"--queue-depth {spec!r}: must be >= 1", EXIT_USAGE)
        device.set_queue_depth(qport, depth)
    for spec in args.queue_priority_rate:
        qport, prio, pps = _port_prio_value(spec, args.priority_queues)
        device.set_queue_rate(qport, pps=pps or None, priority=prio)
    ports: list[RawPort] = []
    server = None
    try:
        for port, iface in specs:
            try:
                rp = RawPort(port, iface, device)
            except OSError as exc:
                raise CliError(
                    f"cannot open interface {iface} for port {port}: {exc.strerror or exc}"
                ) from None
            ports.append(rp)
            device.attach_port(port, rp.send)
        config = b""
        if program is not None:
            try:
                config = make_bundle(p4file)  # type: ignore[arg-type]
            except BundleError:  # load() above read it already, within its bounds
                assert p4file is not None
                config = read_input(p4file, limit=MAX_SOURCE_BYTES, what="a P4 program")
        try:
            # the program is committed before the first call: a client never sees an empty switch
            server, bound, service = serve(
                device, args.grpc_server_addr, program=program, device_config=config
            )
        except (OSError, RuntimeError) as exc:
            raise CliError(f"cannot listen on {args.grpc_server_addr}: {exc}") from None
        device.start()
        for rp in ports:
            rp.start()
        where = (
            args.grpc_server_addr
            if args.grpc_server_addr.startswith("unix:")
            else (f"{args.grpc_server_addr.rpartition(':')[0]}:{bound}")
        )
        log.info(
            "ice-switch device %d: P4Runtime on %s, ports %s, program %s",
            args.device_id,
            where,
            ", ".join(f"{p}@{i}" for p, i in specs) or "none",
            p4file or "none (waiting for SetForwardingPipelineConfig)",
        )
        wait_until_stopped(stop)
        log.info("shutting down")
        return EXIT_OK
    finally:
        for rp in ports:
            rp.close()
        if server is not None:
            service.close()
            server.stop(grace=1).wait(2)
        device.stop()


def check_grpc_addr(addr: str) -> None:
    """CliError (usage) unless ``addr`` is ``unix:PATH`` or ``HOST:PORT`` with a port 0..65535."""
    if addr.startswith("unix:"):
        if len(addr) == len("unix:"):
            raise CliError("--grpc-server-addr unix: needs a socket path", EXIT_USAGE)
        return
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise CliError(
            f"--grpc-server-addr {addr!r}: expected HOST:PORT with a port 0..65535 or unix:PATH",
            EXIT_USAGE,
        )


def parse_port_spec_cli(spec: str) -> tuple[int, str]:
    """parse_port_spec with usage errors as CliError."""
    try:
        return parse_port_spec(spec)
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None


def main(argv: list[str] | None = None) -> int:
    """Entry point of `ice-switch`."""
    args = build_parser().parse_args(argv)
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if args.log_file is not None:
        try:
            handlers.append(logging.FileHandler(args.log_file))
        except OSError as exc:
            print(
                f"ice-switch: error: cannot open log file {args.log_file}: {exc}", file=sys.stderr
            )
            return EXIT_USAGE
    logging.basicConfig(
        level=_level(args.log_level, args.log_console or args.log_file is not None),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=handlers,
    )
    stop = threading.Event()
    signalled: list[int] = []

    def on_signal(signum: int, frame: object) -> None:
        if not signalled:
            # The orderly shutdown below gets SHUTDOWN_GRACE_S; then the process ends anyway.
            watchdog = threading.Timer(SHUTDOWN_GRACE_S, os._exit, args=(EXIT_OK,))
            watchdog.daemon = True
            watchdog.start()
        signalled.append(signum)
        stop.set()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
    try:
        code = run(args, stop)
    except CliError as exc:
        print(f"ice-switch: error: {exc}", file=sys.stderr)
        code = exc.code
    if signalled:
        # A signal must end the process even while a gRPC worker is still busy (a compile
        # abandoned by its deadline): those threads are joined at exit, so leave directly.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
