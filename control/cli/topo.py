"""icectl topo gen|show|check: topology spec files."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import TYPE_CHECKING, Any

from icefabric.control import render
from icefabric.control.cli.common import EXIT_OK, EXIT_USAGE, CliError, Parser, Verbs
from icefabric.topo.model import P4RUNTIME_BASE_PORT

if TYPE_CHECKING:
    from icefabric.topo.spec import TopologySpec

log = logging.getLogger("icectl")


def cmd_topo_gen(args: argparse.Namespace) -> int:
    """icectl topo gen: write a generated spec (file or stdout)."""
    from icefabric.topo import generators
    from icefabric.topo.spec import save_topology

    if args.shape == "leaf-spine":
        spec = generators.leaf_spine(
            leaves=args.leaves,
            spines=args.spines,
            hosts_per_leaf=args.hosts_per_leaf,
            host_rate_gbps=args.host_rate,
            uplink_rate_gbps=args.uplink_rate,
            oversubscription=args.oversubscription,
            links_per_spine=args.links_per_spine,
            name=args.name,
            grpc_base_port=args.grpc_base_port,
        )
    else:
        spec = generators.fat_tree(
            args.k,
            rate_gbps=args.rate,
            hosts_per_tor=args.hosts_per_tor,
            name=args.name,
            grpc_base_port=args.grpc_base_port,
        )
    if args.output:
        try:
            save_topology(spec, args.output)
        except OSError as exc:
            raise CliError(f"{args.output}: cannot write: {exc.strerror or exc}") from exc
        print(
            f"wrote {args.output}: {spec.name}, {len(spec.switches)} switches, "
            f"{len(spec.hosts)} hosts, {len(spec.links)} links",
            file=sys.stderr,
        )
    elif args.format == "json":
        render.emit_json(spec.to_dict())
    else:
        import yaml

        sys.stdout.write(yaml.safe_dump(spec.to_dict(), sort_keys=False, default_flow_style=None))
    return EXIT_OK


def load_topology_arg(path: str) -> Any:
    """Load the topology file named on the command line."""
    from icefabric.topo.spec import load_topology

    return load_topology(path)


def _topology_summary(spec: Any) -> dict[str, Any]:
    from icefabric.control.topology import Topology
    from icefabric.topo.generators import oversubscription

    topo = Topology(spec)
    pairs = topo.leaf_pairs()
    counts = [len(topo.candidate_array(a, b)) for a, b in pairs]
    return {
        "name": spec.name,
        "switches": len(spec.switches),
        "leaves": len(topo.leaves),
        "hosts": len(spec.hosts),
        "links": len(spec.links),
        "leaf_pairs": len(pairs),
        "candidate_paths_min": min(counts) if counts else 0,
        "candidate_paths_max": max(counts) if counts else 0,
        "oversubscription": {leaf: oversubscription(spec, leaf) for leaf in topo.leaves},
        "problems": topo.check_connected(),
    }


def cmd_topo_show(args: argparse.Namespace) -> int:
    """icectl topo show: switches, hosts, links and a summary."""
    spec = load_topology_arg(args.topo)
    summary = _topology_summary(spec)
    if args.json:
        render.emit_json({"spec": spec.to_dict(), "summary": summary})
        return EXIT_OK
    con = render.console()
    con.print(
        f"[bold]{spec.name}[/bold]: {summary['switches']} switches ({summary['leaves']} leaves), "
        f"{summary['hosts']} hosts, {summary['links']} links; "
        f"{summary['candidate_paths_min']}..{summary['candidate_paths_max']} candidate paths "
        "per leaf pair"
    )
    con.print(
        render.table(
            "switches",
            ["name", "role", "device id", "gRPC", "thrift (BMv2)", "switch id", "oversub"],
            [
                (
                    s.name,
                    s.role,
                    s.device_id,
                    s.grpc_addr,
                    spec.thrift_port(s.name),
                    s.switch_id,
                    summary["oversubscription"].get(s.name),
                )
                for s in spec.switches
            ],
        )
    )
    con.print(
        render.table(
            "hosts",
            ["name", "ip", "mac", "leaf", "port", "Gbit/s"],
            [(h.name, h.ip, h.mac, h.leaf, h.port, spec.host_rate(h)) for h in spec.hosts],
        )
    )
    con.print(
        render.table(
            "links",
            ["a", "b", "Gbit/s", "delay us"],
            [
                (
                    f"{ln.a.node}:{ln.a.port}",
                    f"{ln.b.node}:{ln.b.port}",
                    spec.link_rate(ln),
                    spec.link_delay(ln),
                )
                for ln in spec.links
            ],
        )
    )
    for problem in summary["problems"]:
        con.print(f"[red]problem:[/red] {problem}")
    return EXIT_OK


def _long_interface_names(spec: TopologySpec) -> list[str]:
    """Mininet's interface names (``NODE-ethPORT``) of ``spec`` longer than IFNAMSIZ - 1."""
    names = [f"{h.leaf}-eth{h.port}" for h in spec.hosts]
    names += [f"{h.name}-eth0" for h in spec.hosts]
    for ln in spec.links:
        names += [f"{ln.a.node}-eth{ln.a.port}", f"{ln.b.node}-eth{ln.b.port}"]
    return sorted({n for n in names if len(n) > 15})


def cmd_topo_check(args: argparse.Namespace) -> int:
    """icectl topo check: validate a spec; exit 2 with every problem."""
    from icefabric.topo.spec import SpecError

    try:
        spec = load_topology_arg(args.topo)
    except SpecError as exc:
        if args.json:
            render.emit_json({"ok": False, "file": args.topo, "errors": exc.errors})
        else:
            for line in exc.errors:
                print(line, file=sys.stderr)
        return EXIT_USAGE
    summary = _topology_summary(spec)
    problems = [f"{args.topo}: {p}" for p in summary["problems"]]
    for s in spec.switches:
        if s.tier == 0 and not any(h.leaf == s.name for h in spec.hosts):
            log.info("%s: leaf %s has no hosts", args.topo, s.name)
    for name in _long_interface_names(spec)[:3]:
        print(
            f"{args.topo}: warning: Mininet cannot bring this spec up: interface {name} is "
            "longer than Linux's 15 characters (use shorter switch or host names)",
            file=sys.stderr,
        )
    ok = not problems
    if args.json:
        render.emit_json({"ok": ok, "file": args.topo, "errors": problems, "summary": summary})
    elif ok:
        print(
            f"{args.topo}: ok: {spec.name}, {summary['switches']} switches, {summary['hosts']} "
            f"hosts, {summary['links']} links, {summary['candidate_paths_min']}.."
            f"{summary['candidate_paths_max']} candidate paths per leaf pair"
        )
    else:
        for p in problems:
            print(p, file=sys.stderr)
    return EXIT_OK if ok else EXIT_USAGE


def register(verbs: Verbs) -> None:
    """``icectl topo gen|show|check``."""
    tsub = verbs.group(
        "topo", help="generate, show and check topology spec files", dest="topo_command"
    )
    gen = tsub.add_parser("gen", help="generate a leaf-spine or fat-tree spec")
    gsub = gen.add_subparsers(dest="shape", metavar="SHAPE", parser_class=Parser)
    gsub.required = True
    ls = gsub.add_parser("leaf-spine", help="two-tier leaf-spine")
    ls.add_argument("--leaves", type=int, required=True)
    ls.add_argument("--spines", type=int, required=True)
    ls.add_argument("--hosts-per-leaf", type=int, required=True)
    ls.add_argument("--host-rate", type=float, default=100.0, help="Gbit/s (default 100)")
    ls.add_argument(
        "--uplink-rate", type=float, default=None, help="Gbit/s (default: from --oversubscription)"
    )
    ls.add_argument("--oversubscription", type=float, default=1.0, help="default 1.0")
    ls.add_argument("--links-per-spine", type=int, default=1)
    ft = gsub.add_parser("fat-tree", help="three-tier fat-tree(k)")
    ft.add_argument("--k", type=int, required=True, help="even port count")
    ft.add_argument("--rate", type=float, default=100.0, help="Gbit/s of every link")
    ft.add_argument("--hosts-per-tor", type=int, default=None, help="default k/2")
    for g in (ls, ft):
        g.add_argument("--name", default=None)
        g.add_argument(
            "--grpc-base-port",
            type=int,
            default=P4RUNTIME_BASE_PORT,
            help=f"P4Runtime port of the first switch; switch i gets base + i "
            f"(default {P4RUNTIME_BASE_PORT}, P4Runtime's own port)",
        )
        g.add_argument("-o", "--output", help="write to FILE (.json: JSON, else YAML)")
        g.add_argument("--format", choices=("yaml", "json"), default="yaml", help="stdout format")
        g.set_defaults(func=cmd_topo_gen)
    show = tsub.add_parser("show", help="print switches, hosts and links of a spec")
    show.add_argument("topo", metavar="TOPO")
    verbs.add_json(show)
    show.set_defaults(func=cmd_topo_show)
    check = tsub.add_parser("check", help="validate a spec (exit 2 and every problem if bad)")
    check.add_argument("topo", metavar="TOPO")
    verbs.add_json(check)
    check.set_defaults(func=cmd_topo_check)
