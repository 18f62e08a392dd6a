"""Who is on the other end of an agent connection.

TCP: a token bound to the host name. The controller holds one secret (``--agent-token-file``);
host H's token is HMAC-SHA256(secret, H) (:func:`host_token`, printed by ``icectl agent-token
H``), so a token only ever speaks for the host it was made for: h1's token cannot say hello as
h2, and a leaked agent token exposes one host, never the secret.

Unix socket: the peer check (SO_PEERCRED: the controller's own uid or root) is
:func:`icefabric.control.daemon.paths.check_peer`, shared with the API socket; the host name in a hello
is not bound further there, because such a peer can already do everything a host identity
would give it: read the state file and the token secret, drive the API socket (remove jobs,
change the mode), or ptrace the controller. See control/README.md, "Files, sockets and
permissions".
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import socket
import stat
import struct
from pathlib import Path

from icefabric.files import DataFileError, read_text

_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


def peer_pid(sock: socket.socket) -> int:
    """The pid of the process at the other end of a connected Unix-domain socket."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    return int(_UCRED.unpack(raw)[0])


_HOST_TOKEN_LABEL = b"icefabric agent host token\0"


def host_token(secret: str, host: str) -> str:
    """The token host ``host`` presents on TCP: HMAC-SHA256 of its name under ``secret``
    (URL-safe base64, 43 characters)."""
    mac = hmac.new(secret.encode(), _HOST_TOKEN_LABEL + host.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).rstrip(b"=").decode()


def host_token_matches(secret: str | None, host: str, given: str | None) -> bool:
    """Constant-time check that ``given`` is ``host``'s token; no secret means none required."""
    if secret is None:
        return True
    return token_matches(host_token(secret, host), given)


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
        text = read_text(path, limit=4096, what="an agent token file", budget_s=5.0).strip()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the agent token: {exc.strerror or exc}") from None
    except DataFileError as exc:
        raise ValueError(str(exc).splitlines()[0]) from None
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ValueError(f"{path}: agent token file must not be readable by others (chmod 600)")
    if not 16 <= len(text) <= 1024 or not text.isprintable():
        raise ValueError(f"{path}: expected one printable token of 16..1024 characters")
    return text
