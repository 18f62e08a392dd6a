"""``icectl run``'s telemetry options: the /metrics endpoint and the counter poll."""

from __future__ import annotations

import argparse
import logging
import math
from typing import TYPE_CHECKING

from icefabric.control.agents.protocol import parse_address
from icefabric.control.telemetry.metrics import DEFAULT_METRICS, MetricsServer

if TYPE_CHECKING:
    from icefabric.control.controller import Controller


log = logging.getLogger(__name__)


class TelemetryOptionError(ValueError):
    """A bad telemetry option (one line, names the option)."""


def add_telemetry_options(p: argparse.ArgumentParser) -> None:
    """Register --metrics and --counter-poll on ``icectl run``."""
    p.add_argument(
        "--metrics",
        default=None,
        metavar="HOST:PORT",
        help=f"serve Prometheus /metrics here ('off' disables; default {DEFAULT_METRICS}, "
        "skipped with a warning when that port is taken, e.g. by a backup on the same host)",
    )
    p.add_argument(
        "--counter-poll",
        type=float,
        default=1.0,
        metavar="S",
        help="read every switch's port and drop counters every S seconds for the telemetry "
        "(wire drops per link; default 1.0, 0 disables)",
    )


def check_telemetry_options(args: argparse.Namespace) -> tuple[str, int] | None:
    """The metrics address (None: off); TelemetryOptionError for bad values."""
    if args.metrics is None:
        args.metrics = DEFAULT_METRICS
        args.metrics_default = True
    cp = args.counter_poll
    if not math.isfinite(cp) or not (cp == 0 or 0.05 <= cp <= 3600):
        raise TelemetryOptionError(f"--counter-poll: expected 0 or 0.05..3600 seconds, got {cp}")
    if args.metrics == "off":
        return None
    try:
        addr = parse_address(args.metrics)
    except ValueError:
        addr = None
    if addr is None or addr.is_unix:
        raise TelemetryOptionError(
            f"--metrics: expected HOST:PORT (IPv4) or 'off', got {args.metrics!r}"
        )
    return addr.host, addr.port


def start_metrics(
    ctl: Controller, where: tuple[str, int] | None, *, best_effort: bool = False
) -> MetricsServer | None:
    """Serve /metrics for ``ctl``: OSError when the address cannot be bound, or with
    ``best_effort`` (the default address) a warning and None."""
    if where is None:
        return None
    server = MetricsServer(ctl.metrics_source(), where[0], where[1])
    try:
        server.start()
    except OSError as exc:
        if not best_effort:
            raise
        log.warning(
            "metrics: %s:%d: %s; running without /metrics (choose one with --metrics)",
            where[0],
            where[1],
            exc.strerror or exc,
        )
        return None
    return server
