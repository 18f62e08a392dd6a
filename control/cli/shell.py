"""icectl shell: p4runtime-shell connected to one switch, its values shown decoded."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from icefabric.control.cli.common import (
    EXIT_OK,
    EXIT_RUNTIME,
    EXIT_USAGE,
    CliError,
    Verbs,
    api_call,
)
from icefabric.control.cli.topo import load_topology_arg


def shell_command(
    info: dict[str, Any], *, election_id: str, config: tuple[str, str] | None
) -> list[str]:
    """The p4runtime-shell command line for one switch (info: address, device_id), through
    :mod:`icefabric.control.cli.p4shell` (values decoded beside p4runtime-shell's bytes)."""
    cmd = [
        sys.executable,
        "-m",
        "icefabric.control.cli.p4shell",
        "--grpc-addr",
        str(info["address"]),
        "--device-id",
        str(info["device_id"]),
        "--election-id",
        election_id,
    ]
    if config is not None:
        cmd += ["--config", f"{config[0]},{config[1]}"]
    return cmd


def cmd_shell(args: argparse.Namespace) -> int:
    """icectl shell: exec p4runtime-shell connected to one switch."""
    if args.topo:
        spec = load_topology_arg(args.topo)
        try:
            sw = spec.switch(args.switch)
        except KeyError:
            names = ", ".join(s.name for s in spec.switches)
            raise CliError(
                f"{args.topo}: no switch {args.switch!r} (switches: {names})", EXIT_USAGE
            ) from None
        info: dict[str, Any] = {"address": sw.grpc_addr, "device_id": sw.device_id}
    else:
        switches = api_call(args, "switches")
        if args.switch not in switches:
            names = ", ".join(sorted(switches))
            raise CliError(f"no switch {args.switch!r} (switches: {names})", EXIT_USAGE)
        info = switches[args.switch]
    config = None
    if args.config:
        parts = args.config.split(",")
        if len(parts) != 2:
            raise CliError("--config: expected P4INFO,DEVICE_CONFIG", EXIT_USAGE)
        config = (parts[0], parts[1])
    cmd = shell_command(info, election_id=args.election_id, config=config)
    if args.print:
        print(" ".join(cmd))
        return EXIT_OK
    print(
        f"icectl shell: p4runtime-shell on {args.switch}; match values and parameters are "
        'shown decoded after its bytes (value: "\\x0a\\x00\\x02\\x02" (10.0.2.2)); '
        f"`icectl tables {args.switch} [TABLE]` lists them as a table",
        file=sys.stderr,
    )
    try:
        os.execv(cmd[0], cmd)
    except OSError as exc:
        raise CliError(f"cannot start p4runtime-shell: {exc.strerror or exc}") from exc
    return EXIT_RUNTIME  # not reached: execv replaced the process


def register(verbs: Verbs) -> None:
    """``icectl shell``."""
    shell = verbs.add(
        "shell", help="p4runtime-shell connected to one switch (values shown decoded)"
    )
    shell.add_argument("switch", metavar="SWITCH")
    shell.add_argument(
        "--topo", default=None, help="take the address from this spec instead of the daemon"
    )
    shell.add_argument(
        "--election-id",
        default="0,1",
        help="HIGH,LOW (default 0,1: below the controller's, so the shell is a read-only backup)",
    )
    shell.add_argument(
        "--config",
        default=None,
        metavar="P4INFO,DEVCONFIG",
        help="push this pipeline (wipes the switch's entries); default: read P4Info from the switch",
    )
    shell.add_argument("--print", action="store_true", help="print the command, do not run it")
    verbs.add_socket(shell)
    shell.set_defaults(func=cmd_shell)
