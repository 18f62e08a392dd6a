"""The private runtime directory and the files in it: how they are created and trusted.

The controller's sockets and state file (``control/daemon/paths.py``) and the switch logs of
Mininet bring-up (``topo/mininet.py``) live in a private runtime directory the caller owns, mode
0700:
``$ICEFABRIC_RUNTIME_DIR`` when set, else ``/run/icefabric`` for root, else
``$XDG_RUNTIME_DIR/icefabric``, else ``/tmp/icefabric-<uid>``. Files are created with
``O_EXCL|O_NOFOLLOW`` and mode 0600 under a random temporary name and renamed into place, so no
other local user can plant a symlink or read them; a file (or a directory) not owned by the caller
is refused.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path
from typing import BinaryIO

ENV_DIR = "ICEFABRIC_RUNTIME_DIR"


class UnsafePathError(OSError):
    """A runtime path that another user owns or could have planted (symlink, wrong mode)."""


def runtime_dir() -> Path:
    """The private runtime directory for this user (not created; see ``ensure_private_dir``)."""
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env)
    uid = os.geteuid()
    if uid == 0:
        return Path("/run/icefabric")
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "icefabric"
    return Path("/tmp") / f"icefabric-{uid}"


def ensure_private_dir(path: Path | None = None) -> Path:
    """Create ``path`` (default: ``runtime_dir()``) mode 0700, or check an existing one is ours.

    Raises UnsafePathError when it is a symlink, not a directory, owned by another user, or
    writable by group or others.
    """
    d = path if path is not None else runtime_dir()
    try:
        os.mkdir(d, 0o700)
    except FileExistsError:
        pass
    except FileNotFoundError:
        d.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        with contextlib.suppress(FileExistsError):
            os.mkdir(d, 0o700)
    st = os.lstat(d)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise UnsafePathError(f"{d}: expected a directory, found a symlink or another file")
    if st.st_uid != os.geteuid():
        raise UnsafePathError(
            f"{d}: owned by uid {st.st_uid}, not by you (uid {os.geteuid()}); refusing to use it"
        )
    if st.st_mode & 0o077:
        os.chmod(d, 0o700)
    return d


def check_owned(st: os.stat_result, path: Path | str) -> None:
    """UnsafePathError unless ``st`` (an lstat/fstat) is a regular file the caller owns."""
    if not stat.S_ISREG(st.st_mode):
        raise UnsafePathError(f"{path}: not a regular file")
    if st.st_uid != os.geteuid():
        raise UnsafePathError(
            f"{path}: owned by uid {st.st_uid}, not by you (uid {os.geteuid()}); refusing to load it"
        )
    if st.st_mode & 0o022:
        raise UnsafePathError(f"{path}: writable by group or others (mode {st.st_mode & 0o777:o})")


def default_log_dir() -> Path:
    """Where switch logs go when no log folder is given: ``<runtime dir>/logs``, created (both
    folders 0700) when missing."""
    return ensure_private_dir(ensure_private_dir(runtime_dir()) / "logs")


def open_private_log(path: Path) -> BinaryIO:
    """Open ``path`` for writing from the start (truncated), never through a symlink and never
    a file of another user: O_NOFOLLOW, created 0600. UnsafePathError otherwise."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        if os.path.islink(path):
            raise UnsafePathError(f"{path}: is a symlink; refusing to write through it") from exc
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise UnsafePathError(
                f"{path}: not a regular file of yours (uid {st.st_uid}); refusing to write it"
            )
        os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "wb")


def write_private(path: Path, data: bytes) -> None:
    """Atomically replace ``path`` by ``data`` in a 0600 file (:func:`atomic_replace`)."""
    atomic_replace(path, data, 0o600)


def atomic_replace(path: Path, data: bytes, mode: int) -> None:
    """Atomically replace ``path`` by ``data``: a fresh temp file of ``mode`` (O_EXCL,
    O_NOFOLLOW, random name) in the same directory, fsynced, then renamed over ``path``."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, flags, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_private(path: Path, max_bytes: int) -> bytes | None:
    """The contents of ``path`` (None when missing), refusing symlinks, files another user owns,
    group/other-writable files and files over ``max_bytes``."""
    try:
        # O_NONBLOCK: a FIFO at the path is refused by check_owned below instead of hanging here
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if os.path.islink(path):
            raise UnsafePathError(f"{path}: is a symlink; refusing to follow it") from exc
        raise
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        check_owned(st, path)
        if st.st_size > max_bytes:
            raise UnsafePathError(f"{path}: {st.st_size} bytes exceeds the limit of {max_bytes}")
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise UnsafePathError(f"{path}: exceeds the limit of {max_bytes} bytes")
    return data
