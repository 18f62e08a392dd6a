"""Who is on the other end of an agent connection: the shared token of a TCP connection (the
Unix-domain peer check, SO_PEERCRED same user or root, is :func:`icefabric.control.paths.check_peer`,
shared with the API socket)."""

from __future__ import annotations

import hmac
import secrets
import socket
import stat
import struct
from pathlib import Path

_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


def peer_pid(sock: socket.socket) -> int:
    """The pid of the process at the other end of a connected Unix-domain socket."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    return int(_UCRED.unpack(raw)[0])


def token_matches(expected: str | None, given: str | None) -> bool:
    """Constant-time token check; no expected token means none is required."""
    if expected is None:
        return True
    if given is None:
        return False
    return hmac.compare_digest(expected.encode(), given.encode())


def new_token() -> str:
    """A fresh random token for TCP agents."""
    return secrets.token_urlsafe(32)


def read_token(path: Path) -> str:
    """A token from a file only its owner can read (ValueError naming the file otherwise)."""
    try:
        st = path.stat()
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the agent token: {exc}") from None
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ValueError(f"{path}: agent token file must not be readable by others (chmod 600)")
    if not 16 <= len(text) <= 1024 or not text.isprintable():
        raise ValueError(f"{path}: expected one printable token of 16..1024 characters")
    return text
