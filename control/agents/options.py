"""``icectl run``'s options for the agent channel and the rate caps, and starting the channel
from them."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TYPE_CHECKING

from icefabric.control.agents.auth import read_token
from icefabric.control.agents.protocol import agent_socket_for, parse_address
from icefabric.control.congestion.allocator import DEFAULT_TARGET

if TYPE_CHECKING:
    from icefabric.control.agents.server import AgentServer
    from icefabric.control.controller import Controller


class AgentOptionError(ValueError):
    """A bad agent option (one line, names the option)."""


def add_agent_options(p: argparse.ArgumentParser) -> None:
    """Register the agent-channel options on ``icectl run``."""
    p.add_argument(
        "--agent-socket",
        default=None,
        metavar="PATH",
        help="Unix socket for the hosts' rate agents (default: next to the API socket, "
        "NAME-agents.sock; 'off' disables it)",
    )
    p.add_argument(
        "--agent-listen",
        default=None,
        metavar="HOST:PORT",
        help="also accept agents over TCP here (needs --agent-token-file; default: off)",
    )
    p.add_argument(
        "--agent-token-file",
        default=None,
        metavar="FILE",
        help="the secret TCP agents' tokens derive from (a file only you can read); host H "
        "presents the token 'icectl agent-token H' prints, valid for H only",
    )
    p.add_argument(
        "--agent-heartbeat",
        type=float,
        default=1.0,
        metavar="S",
        help="heartbeat interval; an agent silent for 3 intervals is lost (default 1.0)",
    )
    p.add_argument(
        "--rate-target",
        type=float,
        default=DEFAULT_TARGET,
        metavar="U",
        help=f"caps fill each link to this utilisation (default {DEFAULT_TARGET})",
    )


def check_agent_options(args: argparse.Namespace) -> None:
    """AgentOptionError for values out of range (before anything starts)."""
    hb = args.agent_heartbeat
    if not math.isfinite(hb) or not 0.05 <= hb <= 60:
        raise AgentOptionError(f"--agent-heartbeat: expected 0.05..60 seconds, got {hb}")
    t = args.rate_target
    if not math.isfinite(t) or not 0 < t <= 1:
        raise AgentOptionError(f"--rate-target: expected a utilisation in (0, 1], got {t}")
    if args.agent_listen is not None:
        try:
            addr = parse_address(args.agent_listen)
        except ValueError as exc:
            raise AgentOptionError(f"--agent-listen: {exc}") from None
        if addr.is_unix:
            raise AgentOptionError(f"--agent-listen: expected HOST:PORT, got {args.agent_listen!r}")
        if args.agent_token_file is None:
            raise AgentOptionError(
                "--agent-listen needs --agent-token-file (TCP agents need a token)"
            )


def start_agent_channel(
    ctl: Controller, args: argparse.Namespace, api_socket: str | Path
) -> AgentServer | None:
    """Start the channel as the options say (None when both transports are off).

    Raises AgentOptionError (bad token file) or AgentServerError (cannot listen).
    """
    unix: Path | None
    if args.agent_socket == "off":
        unix = None
    elif args.agent_socket:
        unix = Path(args.agent_socket)
    else:
        unix = agent_socket_for(api_socket)
    token = None
    if args.agent_token_file is not None:
        try:
            token = read_token(Path(args.agent_token_file))
        except ValueError as exc:
            raise AgentOptionError(f"--agent-token-file: {exc}") from None
    if unix is None and args.agent_listen is None:
        return None
    return ctl.agents.listen(
        unix, tcp=args.agent_listen, token=token, heartbeat_s=args.agent_heartbeat
    )
