"""``icectl run``: the controller daemon, its API handlers and its lifetime (signals, socket)."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from icefabric.control.agents.options import (
    AgentOptionError,
    check_agent_options,
    start_agent_channel,
)
from icefabric.control.agents.server import AgentServerError
from icefabric.control.controller import Controller, JobRejected, StateWriteError
from icefabric.control.daemon.api import (
    ApiServer,
    ApiUnavailable,
    Handler,
    OperationFailed,
    RequestError,
)
from icefabric.control.daemon.paths import default_state_file
from icefabric.control.fabric import MODES, FabricError, FabricOptions
from icefabric.control.fabric_targets import TOFINO_DEFAULT_CPU_PORT, for_target
from icefabric.control.store.base import StoreError
from icefabric.control.store.options import StoreOptionError, make_store
from icefabric.control.telemetry.metrics import MetricsServer
from icefabric.control.telemetry.options import (
    TelemetryOptionError,
    check_telemetry_options,
    start_metrics,
)
from icefabric.control.topology import TopologyError
from icefabric.p4src.ice_p4 import CPU_PORT
from icefabric.private import ensure_private_dir
from icefabric.waiting import wait_until_stopped

if TYPE_CHECKING:
    from icefabric.control.p4rt import PipelineConfig
    from icefabric.topo.spec import TopologySpec

log = logging.getLogger(__name__)


def _str_arg(args: dict[str, Any], key: str, *, required: bool = True) -> str | None:
    value = args.get(key)
    if value is None:
        if required:
            raise RequestError(f"missing argument {key!r}")
        return None
    if not isinstance(value, str) or not value:
        raise RequestError(f"argument {key!r}: expected a non-empty string, got {value!r}")
    return value


def _usage_errors(fn: Callable[[dict[str, Any]], Any]) -> Handler:
    """Report the controller's validation errors as usage errors (exit code 2 in icectl)."""

    def wrapped(args: dict[str, Any]) -> Any:
        try:
            return fn(args)
        except (JobRejected, TopologyError, FabricError) as exc:
            raise RequestError(str(exc)) from exc
        except StateWriteError as exc:  # rolled back: nothing changed
            raise OperationFailed(str(exc)) from exc

    return wrapped


def api_handlers(ctl: Controller) -> dict[str, Handler]:
    """The operations ``icectl`` calls, bound to one controller."""

    def jobs_add(args: dict[str, Any]) -> Any:
        job = args.get("job")
        if not isinstance(job, dict):
            raise RequestError("argument 'job': expected a job description object")
        return ctl.add_job(job)

    def jobs_rm(args: dict[str, Any]) -> Any:
        return ctl.remove_job(str(_str_arg(args, "name")))

    def paths(args: dict[str, Any]) -> Any:
        return ctl.paths(
            _str_arg(args, "flow", required=False), _str_arg(args, "job", required=False)
        )

    def stats(args: dict[str, Any]) -> Any:
        return ctl.stats(_str_arg(args, "switch", required=False))

    def telemetry(args: dict[str, Any]) -> Any:
        limit = args.get("limit", 20)
        if not isinstance(limit, int) or limit < 0:
            raise RequestError(f"argument 'limit': expected an integer >= 0, got {limit!r}")
        return {
            "received": ctl.reports.received,
            "undecodable": ctl.reports.undecodable,
            "switch_names": {str(s.switch_id): s.name for s in ctl.spec.switches},
            "reports": ctl.reports.recent(limit),
            **ctl.telemetry.snapshot(),
        }

    def mode(args: dict[str, Any]) -> Any:
        m = str(_str_arg(args, "mode"))
        if m not in MODES:
            raise RequestError(f"argument 'mode': expected one of {', '.join(MODES)}, got {m!r}")
        return ctl.set_mode(m)

    def link(args: dict[str, Any]) -> Any:
        a, b = str(_str_arg(args, "a")), str(_str_arg(args, "b"))
        state = _str_arg(args, "state")
        if state == "down":
            return ctl.fail_link(a, b).to_dict()
        if state == "up":
            return ctl.restore_link(a, b).to_dict()
        raise RequestError(f"argument 'state': expected 'down' or 'up', got {state!r}")

    def resync(args: dict[str, Any]) -> Any:
        return ctl.resync_switch(str(_str_arg(args, "switch")))

    def primary_only(fn: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
        def wrapped(args: dict[str, Any]) -> Any:
            if not ctl.active:
                raise RuntimeError(
                    "this controller is a standby (backup); send changes to the primary"
                )
            return fn(args)

        return wrapped

    def agents(_args: dict[str, Any]) -> Any:
        return ctl.agents.view_agents()

    def caps(args: dict[str, Any]) -> Any:
        return ctl.agents.view_caps(_str_arg(args, "host", required=False))

    def jobs_phase(args: dict[str, Any]) -> Any:
        try:
            return ctl.agents.set_phase(str(_str_arg(args, "job")), str(_str_arg(args, "phase")))
        except KeyError as exc:
            raise RequestError(str(exc.args[0])) from exc

    def events(args: dict[str, Any]) -> Any:
        since, limit = args.get("since", 0), args.get("limit", 1000)
        for name, v in (("since", since), ("limit", limit)):
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < 1 << 62:
                raise RequestError(f"argument {name!r}: expected an integer >= 0, got {v!r}")
        return {"events": ctl.events.since(since, limit), "seq": ctl.events.seq}

    def tables(args: dict[str, Any]) -> Any:
        from icefabric.control.controller.tables_view import (
            decode_entries,
            resolve_table,
            table_names,
        )

        sw = str(_str_arg(args, "switch"))
        if sw not in ctl.pool:
            raise RequestError(f"no switch {sw!r} (switches: {', '.join(sorted(ctl.pool))})")
        conn = ctl.pool[sw]
        if not conn.is_connected:
            raise RuntimeError(f"switch {sw} is not connected (icectl status)")
        table = _str_arg(args, "table", required=False)
        try:
            name = resolve_table(conn.p4info, str(table)) if table else ""
        except KeyError as exc:
            raise RequestError(str(exc.args[0])) from exc
        rows = decode_entries(conn.p4info, conn.read_table(name))
        return {"switch": sw, "entries": rows, "tables": table_names(conn.p4info)}

    ops: dict[str, Callable[[dict[str, Any]], Any]] = {
        "status": lambda _a: ctl.status(),
        "tables": tables,
        "events": events,
        "links": lambda _a: ctl.links(),
        "switches": lambda _a: ctl.switches(),
        "jobs.add": primary_only(jobs_add),
        "jobs.rm": primary_only(jobs_rm),
        "jobs.ls": lambda _a: ctl.list_jobs(),
        "jobs.phase": primary_only(jobs_phase),
        "agents": agents,
        "caps": caps,
        "paths": paths,
        "stats": stats,
        "int": telemetry,
        "mode": primary_only(mode),
        "link": primary_only(link),
        "resync": primary_only(resync),
    }
    return {name: _usage_errors(fn) for name, fn in ops.items()}


def agent_addresses(server: Any) -> list[str]:
    """The addresses agents reach this replica's channel at (unix:PATH, tcp:HOST:PORT)."""
    if server is None:
        return []
    out = []
    if server.unix_path:
        out.append(f"unix:{server.unix_path}")
    if server.tcp:
        out.append(f"tcp:{server.tcp.host}:{server.tcp_port}")
    return out


class _RunError(Exception):
    """A one-line error ``icectl run`` prints before exiting with ``code``."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def _pipeline_and_options(
    args: argparse.Namespace, spec: TopologySpec
) -> tuple[PipelineConfig, TopologySpec, FabricOptions]:
    """The target's pipeline, the spec as the target numbers its ports, the fabric options."""
    from icefabric.control.p4rt import PipelineConfig
    from icefabric.p4src import ICE_P4

    cpu_port = args.cpu_port
    if args.target == "bmv2":
        if not args.bmv2_json or not args.p4info:
            raise _RunError("icectl: run --target bmv2 needs --bmv2-json and --p4info (make p4)")
        pipeline = PipelineConfig.for_bmv2(args.bmv2_json, args.p4info)
    elif args.target == "tofino":
        from icefabric.topo.sdk_ports import to_device_ports

        if not args.tofino_out:
            raise _RunError(
                "icectl: run --target tofino needs --tofino-out (bf-p4c's output folder)"
            )
        pipeline = PipelineConfig.for_tofino(args.tofino_out, args.p4info, fmt=args.tofino_format)
        spec = to_device_ports(spec)  # every entry names device (SDK) ports
        if cpu_port is None:
            cpu_port = TOFINO_DEFAULT_CPU_PORT
    else:
        pipeline = PipelineConfig.for_embedded(args.p4 or ICE_P4)
    if cpu_port is not None and not 0 <= cpu_port <= 511:
        raise _RunError(f"icectl: run: --cpu-port must be 0..511, got {cpu_port}")
    options = FabricOptions(mode=args.mode, cpu_port=CPU_PORT if cpu_port is None else cpu_port)
    options = for_target(options, args.target)
    return pipeline, spec, options


def _switch_addresses(args: argparse.Namespace, spec: TopologySpec) -> dict[str, str]:
    """``--switch-addr NAME=HOST:PORT`` items, checked against the spec's switches."""
    addresses: dict[str, str] = {}
    names = {s.name for s in spec.switches}
    for item in args.switch_addr:
        name, sep, addr = item.partition("=")
        host, colon, port = addr.rpartition(":")
        if not sep or name not in names or not colon or not host or not port.isdigit():
            raise _RunError(
                f"icectl: run: --switch-addr {item!r}: expected NAME=HOST:PORT with NAME a switch "
                f"of {spec.name} ({', '.join(sorted(names))})"
            )
        addresses[name] = addr
    return addresses


def _check_run_options(args: argparse.Namespace) -> tuple[str, int] | None:
    """Probe, agent and telemetry options; where --metrics listens (None: nowhere)."""
    if args.probe_interval < 0 or args.probe_misses < 1:
        raise _RunError(
            "icectl: run: --probe-interval must be >= 0 ms and --probe-misses >= 1 "
            f"(got {args.probe_interval} and {args.probe_misses})"
        )
    try:
        check_agent_options(args)
        return check_telemetry_options(args)
    except (AgentOptionError, TelemetryOptionError) as exc:
        raise _RunError(f"icectl: run: {exc}") from None


def run_daemon(args: argparse.Namespace) -> int:
    """Run the controller until SIGINT/SIGTERM; returns the exit code."""
    from icefabric.control.ccl.job import load_job
    from icefabric.topo.spec import load_topology

    spec = load_topology(args.topo)
    try:
        pipeline, spec, options = _pipeline_and_options(args, spec)
        metrics_at = _check_run_options(args)
        addresses = _switch_addresses(args, spec)
    except _RunError as exc:
        print(exc, file=sys.stderr)
        return exc.code
    jobs = [load_job(p) for p in args.job]
    state_file = Path(args.state) if args.state else default_state_file(spec.name)
    try:
        store = make_store(args, spec.name, state_file)
    except (StoreOptionError, StoreError) as exc:
        print(f"icectl: run: {exc}", file=sys.stderr)
        return 2
    try:
        if not args.state and store.kind == "file":
            ensure_private_dir(state_file.parent)
    except OSError as exc:
        print(f"icectl: run: {exc}", file=sys.stderr)
        return 1
    ctl = Controller(
        spec,
        pipeline,
        election_id=args.election_id,
        backup=args.backup,
        options=options,
        method=args.method,
        store=store,
        addresses=addresses,
        connect_timeout=args.connect_timeout,
        switch_dead_s=args.switch_dead if args.switch_dead and args.switch_dead > 0 else None,
        probe_interval_s=args.probe_interval / 1e3,
        probe_misses=args.probe_misses,
        rate_target=args.rate_target,
        counter_poll_s=args.counter_poll,
    )
    server = ApiServer(args.socket, api_handlers(ctl))
    stop = threading.Event()
    metrics: MetricsServer | None = None

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("signal %d: shutting down", signum)
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        server.start()
    except ApiUnavailable as exc:
        print(f"icectl: {exc}", file=sys.stderr)
        return 1
    if store.elects:
        ctl.startup_jobs = jobs  # added by whichever replica is primary, if missing
    try:
        ctl.start()
        try:
            agent_server = start_agent_channel(ctl, args, args.socket)
        except (AgentOptionError, AgentServerError) as exc:
            print(f"icectl: run: agent channel: {exc}", file=sys.stderr)
            return 2 if isinstance(exc, AgentOptionError) else 1
        if store.elects:  # every replica's addresses in etcd: agents and icectl find them
            store.publish(  # type: ignore[attr-defined]
                api=str(args.socket), agent=agent_addresses(agent_server)
            )
        try:
            metrics = start_metrics(
                ctl, metrics_at, best_effort=getattr(args, "metrics_default", False)
            )
        except OSError as exc:
            print(f"icectl: run: --metrics {args.metrics}: {exc.strerror or exc}", file=sys.stderr)
            return 1
        for job in jobs if not store.elects else []:  # idempotent: a restart finds its --job
            try:
                ctl.ensure_job(job)
            except (JobRejected, TopologyError) as exc:
                print(f"icectl: run: --job {job.name}: {exc}", file=sys.stderr)
                return 2
            except StateWriteError as exc:
                print(f"icectl: run: --job {job.name}: {exc}", file=sys.stderr)
                return 1
        role = "primary" if ctl.active else ("standby" if store.elects else "backup")
        log.info(
            "icectl run: %s controller for %s (%d switches), API on %s",
            role,
            spec.name,
            len(spec.switches),
            args.socket,
        )
        if metrics is not None:
            log.info("metrics on http://%s:%d/metrics", metrics.host, metrics.port)
        wait_until_stopped(stop)
    finally:
        if metrics is not None:
            metrics.stop()
        server.stop()
        ctl.stop()
    return 0
