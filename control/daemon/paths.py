"""Where the controller keeps its sockets and state, and whom it trusts on a Unix socket.

The API socket (``default_socket``) and the state file primary and backup share
(``default_state_file``) sit in the private runtime directory of :mod:`icefabric.private`
(which creates it 0700 and its files 0600). A Unix-socket peer is trusted only when it runs as
the caller's uid or as root (``SO_PEERCRED``).
"""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path

from icefabric.private import runtime_dir

_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


class PeerRejected(OSError):
    """A Unix-socket peer that runs as another (non-root) user."""


def default_socket() -> Path:
    """The controller's API socket when neither --socket nor $ICECTL_SOCKET is given."""
    return runtime_dir() / "icectl.sock"


def default_state_file(topology_name: str) -> Path:
    """Where primary and backup share the running jobs when --state is not given."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in topology_name)[:100]
    return runtime_dir() / f"{safe or 'fabric'}.state.json"


def is_listening(path: Path) -> bool:
    """Whether something accepts connections on the Unix socket ``path`` (a stale one: no)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(0.5)
    try:
        probe.connect(str(path))
    except OSError:
        return False
    finally:
        probe.close()
    return True


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a connected Unix socket (SO_PEERCRED)."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    _pid, uid, _gid = _UCRED.unpack(raw)
    return int(uid)


def check_peer(sock: socket.socket, what: str) -> None:
    """PeerRejected unless the peer of ``sock`` runs as the caller's uid or as root."""
    uid = peer_uid(sock)
    me = os.geteuid()
    if uid not in (me, 0):
        raise PeerRejected(
            f"{what}: the peer runs as uid {uid}, not as you (uid {me}) or root; refusing to talk "
            "to it (another user's process may have taken this socket path)"
        )
