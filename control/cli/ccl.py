"""icectl ccl inspect, and the options that build a job from a CCL log or an HCCL rank table.

``add_log_options`` is shared by ``icectl plan``, ``icectl jobs add`` and ``icectl ccl
inspect``; ``job_from_args`` turns those options into a validated job, printing the log's
warnings (``file:line: reason``) and notes on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from icefabric.control import render
from icefabric.control.cli.common import EXIT_OK, EXIT_USAGE, CliError, Verbs

_Parsed = Any  # NcclLog, imported lazily (icectl starts fast)


def add_log_options(
    p: argparse.ArgumentParser, *, log_flag: bool = True, topo_flag: bool = False
) -> None:
    """Options that build a job from an NCCL log or an HCCL rank table.

    ``topo_flag`` adds ``--topo`` (for ``--host-pattern ordered``) where the command has none.
    """
    g = p.add_argument_group("job from a CCL log or rank table")
    if topo_flag:
        g.add_argument(
            "--topo",
            default=None,
            help="topology spec whose host order --host-pattern ordered follows",
        )
    if log_flag:
        g.add_argument(
            "--nccl-log",
            default=None,
            metavar="LOG",
            help="build the job from an NCCL_DEBUG=INFO log",
        )
        g.add_argument(
            "--hccl-rank-table",
            default=None,
            metavar="JSON",
            help="build the job's ranks from an HCCL (Ascend) rank table",
        )
    g.add_argument(
        "--comm",
        default=None,
        metavar="ID",
        help="the communicator to import: commId (or a prefix of it), or #N from "
        "'icectl ccl inspect' (default: the largest)",
    )
    g.add_argument(
        "--all-comms", action="store_true", help="import every communicator, one phase each"
    )
    g.add_argument("--name", default=None, help="job name (default: the file's stem)")
    g.add_argument("--collective", default="all-reduce", help="default all-reduce")
    g.add_argument("--algorithm", default=None, help="ring, tree, ... (default: from the log)")
    g.add_argument("--message-bytes", default="256MiB", help="default 256MiB")
    g.add_argument(
        "--host-map", action="append", default=[], metavar="LOGHOST=TOPOHOST", help="rename a host"
    )
    g.add_argument(
        "--host-map-file",
        action="append",
        default=[],
        metavar="FILE",
        help="host renames: YAML/JSON {loghost: topohost} or lines 'loghost topohost'",
    )
    g.add_argument(
        "--host-pattern",
        action="append",
        default=[],
        metavar="REGEX=TEMPLATE|ordered",
        help="rename hosts matching REGEX (whole name) to TEMPLATE (\\1, \\g<name>); 'ordered': "
        "the log's hosts by lowest rank become the topology's hosts in order (needs --topo)",
    )


def _warn(parsed: _Parsed) -> None:
    for w in parsed.warnings:
        print(f"warning: {w}", file=sys.stderr)
    if parsed.warnings_dropped:
        print(
            f"warning: {parsed.source}: {parsed.warnings_dropped} more warnings not shown "
            f"(the first {len(parsed.warnings)} are above)",
            file=sys.stderr,
        )
    for n in parsed.notes:
        print(f"note: {n}", file=sys.stderr)


def _load_log(path: str) -> _Parsed:
    from icefabric.control.ccl.nccl_log import load_nccl_log
    from icefabric.files import DataFileError

    try:
        return load_nccl_log(path)
    except DataFileError as exc:
        raise CliError(str(exc).splitlines()[0], EXIT_USAGE) from None
    except OSError as exc:
        raise CliError(f"{path}: cannot read: {exc.strerror or exc}", EXIT_USAGE) from exc


def _host_map(args: argparse.Namespace, topology_hosts: Sequence[str] | None) -> Any:
    from icefabric.control.ccl.nccl.hostmap import HostMapError, build

    try:
        return build(
            args.host_map or [], args.host_map_file or [], args.host_pattern or [], topology_hosts
        )
    except HostMapError as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc


def job_from_args(
    args: argparse.Namespace,
    *,
    path: str | None = None,
    topology_hosts: Sequence[str] | None = None,
    parsed: _Parsed | None = None,
) -> Any:
    """The job the log options describe (CliError with exit code 2 when it cannot be built)."""
    from icefabric.control.ccl.job import parse_size
    from icefabric.control.ccl.nccl.hccl import looks_like_rank_table
    from icefabric.control.ccl.nccl.tojob import check_collective, to_job

    try:
        size = parse_size(args.message_bytes)
        check_collective(args.collective, args.algorithm)
    except ValueError as exc:
        msg = str(exc)
        raise CliError(
            msg if msg.startswith("--") else f"--message-bytes: {msg}", EXIT_USAGE
        ) from exc
    src = path or args.nccl_log or getattr(args, "hccl_rank_table", None)
    if src is None:
        raise CliError("give --nccl-log LOG or --hccl-rank-table JSON", EXIT_USAGE)
    name = args.name or Path(src).stem
    if topology_hosts is None and getattr(args, "topo", None):
        from icefabric.topo.spec import load_topology

        topology_hosts = [h.name for h in load_topology(args.topo).hosts]
    hm = _host_map(args, topology_hosts)
    if getattr(args, "hccl_rank_table", None) == src or (
        parsed is None and looks_like_rank_table(src)
    ):
        return _job_from_rank_table(args, src, name, size, hm)
    if parsed is None:
        parsed = _load_log(src)
        _warn(parsed)
    if not parsed.comms:
        raise CliError(
            f"{src}: no communicator found: the log has no NCCL init lines ('comm 0x... rank N "
            "nranks M ... Init COMPLETE'); run with NCCL_DEBUG=INFO and keep every rank's output",
            EXIT_USAGE,
        )
    try:
        comms = parsed.comms if args.all_comms else [parsed.select(args.comm)]
        return to_job(
            comms,
            name=name,
            collective=args.collective,
            message_bytes=size,
            algorithm=args.algorithm,
            host_map=hm,
        )
    except (LookupError, ValueError) as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc


def _job_from_rank_table(args: argparse.Namespace, src: str, name: str, size: int, hm: Any) -> Any:
    from icefabric.control.ccl.job import JobError, parse_job
    from icefabric.control.ccl.nccl.hccl import RankTableError, load_rank_table
    from icefabric.control.ccl.nccl.hostmap import HostMapError

    try:
        table = load_rank_table(src)
        mapping = hm.resolve([r.host for r in table.ranks])
    except (RankTableError, HostMapError) as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc
    phase: dict[str, Any] = {"name": "main", "collective": args.collective, "message_bytes": size}
    if args.algorithm:
        phase["algorithm"] = args.algorithm
    data = {
        "name": name,
        "ranks": [
            {"host": mapping[r.host], "vendor": r.vendor, "device": r.device} for r in table.ranks
        ],
        "phases": [phase],
    }
    try:
        return parse_job(data, source=f"job {name!r} from {src}")
    except JobError as exc:
        raise CliError("; ".join(exc.errors), EXIT_USAGE) from exc


def log_job_for_plan(args: argparse.Namespace) -> list[tuple[Any, str]]:
    """``icectl plan``: the job of --nccl-log / --hccl-rank-table (with its source), if given."""
    src = args.nccl_log or args.hccl_rank_table
    if src is None:
        if not args.job:
            raise CliError(
                "plan: give --job JOB (repeatable), --nccl-log LOG or --hccl-rank-table JSON",
                EXIT_USAGE,
            )
        return []
    from icefabric.control.ccl.nccl.tojob import single_host_note
    from icefabric.topo.spec import load_topology

    spec = load_topology(args.topo)
    job = job_from_args(args, topology_hosts=[h.name for h in spec.hosts])
    note = single_host_note(job)
    if note:
        print(note, file=sys.stderr)
    return [(job, src)]


def comm_rows(parsed: _Parsed) -> list[dict[str, Any]]:
    """One plain-data row per communicator (for tables and --json)."""
    rows = []
    for i, c in enumerate(parsed.comms):
        hosts = list(dict.fromkeys(c.hosts().values()))
        full_trees = c.complete_trees()
        rows.append(
            {
                "index": f"#{i}",
                "comm": c.key,
                "parent": c.parent or None,
                "nranks": c.nranks,
                "ranks_found": len(c.ranks),
                "hosts": hosts,
                "channels": c.n_channels,
                "rings": {str(ch): list(r) for ch, r in sorted(c.rings.items())},
                "ring_sources": {str(ch): s for ch, s in sorted(c.ring_sources.items())},
                "trees": {
                    str(ch): {str(r): p for r, p in sorted(t.items())}
                    for ch, t in sorted(full_trees.items())
                },
                "partial_trees": sorted(set(c.trees) - set(full_trees)),
                "tree_format": c.tree_format or None,
                "version": c.version or None,
                "library": c.library,
                "first_line": c.first_line,
            }
        )
    return rows


def _cmd_inspect(args: argparse.Namespace) -> int:
    from icefabric.control.ccl.nccl.hccl import looks_like_rank_table

    if looks_like_rank_table(args.log):
        return _inspect_rank_table(args)
    parsed = _load_log(args.log)
    rows = comm_rows(parsed)
    if args.json:
        render.emit_json(
            {
                "source": parsed.source,
                "lines_read": parsed.lines_read,
                "lines_used": parsed.lines_used,
                "communicators": rows,
                "warnings": [
                    {"line": w.line, "reason": w.reason, "text": w.text} for w in parsed.warnings
                ],
                "warnings_not_listed": parsed.warnings_dropped,
                "notes": parsed.notes,
            }
        )
    else:
        _warn(parsed)
        con = render.console()
        con.print(
            f"{parsed.source}: {parsed.lines_read} lines, {parsed.lines_used} CCL lines used, "
            f"{len(rows)} communicator(s), {len(parsed.warnings) + parsed.warnings_dropped} "
            "warning(s)"
        )
        con.print(
            render.table(
                None,
                ["#", "comm", "ranks", "hosts", "channels", "rings", "trees", "version"],
                [
                    (
                        r["index"],
                        r["comm"] + (f" (split of {r['parent']})" if r["parent"] else ""),
                        f"{r['ranks_found']}/{r['nranks']}",
                        _hosts_cell(r["hosts"]),
                        r["channels"],
                        _ring_cell(r),
                        f"{len(r['trees'])}"
                        + (f" ({r['tree_format']})" if r["tree_format"] else "")
                        + (f", {len(r['partial_trees'])} partial" if r["partial_trees"] else ""),
                        r["version"] or "-",
                    )
                    for r in rows
                ],
                justify={"ranks": "right", "channels": "right"},
            )
        )
    if not parsed.comms:
        raise CliError(
            f"{args.log}: no communicator found (no NCCL init lines such as 'comm 0x... rank N "
            "nranks M ... Init COMPLETE')",
            EXIT_USAGE,
        )
    if args.to_job:
        job = job_from_args(args, path=args.log, parsed=parsed)
        _write_job(job, args.to_job)
    return EXIT_OK


def _hosts_cell(hosts: list[str]) -> str:
    if len(hosts) <= 8:
        return f"{len(hosts)}: {', '.join(hosts)}"
    return f"{len(hosts)}: {', '.join(hosts[:6])} and {len(hosts) - 6} more (all in --json)"


def _ring_cell(r: dict[str, Any]) -> str:
    srcs = list(r["ring_sources"].values())
    if not srcs:
        return "0"
    kinds = ", ".join(f"{srcs.count(s)} from {s}" for s in dict.fromkeys(srcs))
    return f"{len(srcs)} ({kinds})"


def _inspect_rank_table(args: argparse.Namespace) -> int:
    from icefabric.control.ccl.nccl.hccl import RankTableError, load_rank_table

    try:
        table = load_rank_table(args.log)
    except RankTableError as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc
    servers = list(dict.fromkeys(r.host for r in table.ranks))
    if args.json:
        render.emit_json(
            {
                "source": table.source,
                "kind": "hccl-rank-table",
                "ranks": [
                    {"rank": r.rank, "host": r.host, "device": r.device, "device_ip": ip}
                    for r, ip in zip(table.ranks, table.device_ips, strict=True)
                ],
                "servers": servers,
            }
        )
    else:
        render.console().print(
            f"{table.source}: HCCL rank table, {len(table.ranks)} ranks on {len(servers)} "
            f"server(s): {', '.join(servers)}"
        )
    if args.to_job:
        _write_job(job_from_args(args, path=args.log), args.to_job)
    return EXIT_OK


def _write_job(job: Any, path: str) -> None:
    import yaml

    from icefabric.control.ccl.nccl.tojob import single_host_note
    from icefabric.files import write_output

    data = job.to_dict()
    text = (
        json.dumps(data, indent=2) + "\n"
        if path.lower().endswith(".json")
        else yaml.safe_dump(data, sort_keys=False, default_flow_style=None)
    )
    try:
        write_output(path, text)
    except OSError as exc:
        raise CliError(f"{path}: cannot write: {exc.strerror or exc}", EXIT_USAGE) from exc
    note = single_host_note(job)
    if note:
        print(note, file=sys.stderr)
    print(
        f"wrote job {job.name!r} ({len(job.ranks)} ranks, {len(job.phases)} phase(s)) to {path}",
        file=sys.stderr,
    )


def register(verbs: Verbs) -> None:
    """``icectl ccl inspect``."""
    csub = verbs.group(
        "ccl", help="read CCL logs (NCCL/RCCL) and HCCL rank tables", dest="ccl_command"
    )
    ins = csub.add_parser(
        "inspect",
        help="list a log's communicators (ranks, hosts, channels, rings, trees, version)",
        description="List every communicator of an NCCL_DEBUG=INFO log (or the ranks of an HCCL "
        "rank table); with --to-job, write the job a plan would use as a job file to edit and "
        "replay.",
    )
    ins.add_argument("log", metavar="LOG", help="NCCL_DEBUG=INFO log, or HCCL rank table JSON")
    ins.add_argument("--to-job", default=None, metavar="FILE", help="write the job (.yaml/.json)")
    add_log_options(ins, log_flag=False, topo_flag=True)
    verbs.add_json(ins)
    ins.set_defaults(func=_cmd_inspect)
