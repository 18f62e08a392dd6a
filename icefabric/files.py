"""Every data file the project reads or writes at a place a user names, in one place.

Reading (:func:`read_input`, :func:`read_data_file`): bounded by the bytes actually read (a
character device such as ``/dev/zero``, a socket or a directory is refused before a byte is
read; a FIFO or pipe only where a stream makes sense, with a wall-clock budget), opened
non-blocking so a FIFO with no writer cannot hang the caller, and checked against the rights of
the person the file is read for: the invoking user behind ``sudo``, and, for a file named inside
another file (an experiment's ``workload.job``), that file's owner as well. So root running
another user's experiment never reads, and never quotes in an error, a file that user could not
read. JSON is decoded with bounded nesting and integer length (:func:`parse_json`), YAML with
bounded nesting and no duplicated key.

Writing (:func:`write_output`): a fresh temporary file (``O_CREAT|O_EXCL|O_NOFOLLOW``) renamed
over the target, so nothing is written through a symlink or into an inode someone else planted,
and an existing target that is a symlink, not a regular file, or owned by another user is
refused rather than replaced.

Errors are :class:`DataFileError` (one line per problem, naming the file, the key and what was
expected; see :func:`printable`).
"""

from __future__ import annotations

import contextlib
import errno
import io
import itertools
import json
import os
import pwd
import re
import select
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import yaml

from icefabric.private import atomic_replace

MAX_FILE_BYTES = 64 * 1024 * 1024  # a topology, job, experiment or results file
MAX_NESTING = 64  # levels of YAML/JSON nesting in such a file
MAX_INT_DIGITS = 64  # digits of one JSON integer (Python refuses past 4300 with a ValueError)
READ_BUDGET_S = 30.0  # wall clock to read one input, streams included
MAX_ERROR_CHARS = 300  # one error line; a value quoted in it is cut to fit
_CHUNK = 1 << 20


class DataFileError(ValueError):
    """A data file (topology, job, experiment, results ...) could not be read or failed
    validation; ``errors`` lists every problem as ``file: key: message``."""

    def __init__(self, errors: Iterable[str]) -> None:
        self.errors: list[str] = list(errors)
        shown = self.errors[:20]
        more = len(self.errors) - len(shown)
        text = "\n".join(shown) + (f"\n... and {more} more" if more > 0 else "")
        super().__init__(text)


class JsonError(ValueError):
    """JSON text that is malformed or past a bound (one line, no source: callers add it)."""


def printable(text: str) -> str:
    """``text`` as one error line: control and other unprintable characters escaped
    (``\\x1b``), so that what a file holds never drives the terminal, and cut at
    ``MAX_ERROR_CHARS``."""
    if not text.isprintable():
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    if len(text) > MAX_ERROR_CHARS:
        text = text[: MAX_ERROR_CHARS - 3] + "..."
    return text


# --------------------------------------------------------------------------- whose rights


@dataclass(slots=True, frozen=True)
class Reader:
    """Someone a file is read for: a uid and its groups (root reads everything)."""

    uid: int
    gids: frozenset[int]

    @classmethod
    def of_uid(cls, uid: int, gid: int | None = None) -> Reader:
        """The user ``uid`` with the groups the password database gives it."""
        gids: set[int] = set() if gid is None else {gid}
        try:
            pw = pwd.getpwuid(uid)
            gids.update(os.getgrouplist(pw.pw_name, pw.pw_gid))
        except (KeyError, OSError):
            pass
        return cls(uid, frozenset(gids))

    def may_read(self, st: os.stat_result) -> bool:
        """Whether this reader could open a file of that mode and owner for reading."""
        if self.uid == 0:
            return True
        if st.st_uid == self.uid:
            return bool(st.st_mode & stat.S_IRUSR)
        if st.st_gid in self.gids:
            return bool(st.st_mode & stat.S_IRGRP)
        return bool(st.st_mode & stat.S_IROTH)


def caller() -> Reader:
    """Who the process reads files for: the user behind ``sudo`` (``SUDO_UID``) when running
    as root through it, else the effective user."""
    euid = os.geteuid()
    sudo = os.environ.get("SUDO_UID", "")
    if euid == 0 and sudo.isdigit() and int(sudo) != 0:
        return Reader.of_uid(int(sudo))
    return Reader(euid, frozenset(os.getgroups()) | {os.getegid()})


def owner_of(path: str | Path) -> Reader:
    """The owner of ``path`` as a reader: a file named inside ``path`` is read with the rights
    of whoever wrote ``path`` (an experiment file of user A run by root reads what A may)."""
    st = os.stat(path)
    return Reader.of_uid(st.st_uid, st.st_gid)


def _kind_of(mode: int) -> str:
    if stat.S_ISCHR(mode):
        return "character device"
    if stat.S_ISBLK(mode):
        return "block device"
    if stat.S_ISFIFO(mode):
        return "FIFO or pipe"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISDIR(mode):
        return "directory"
    return "special file"


# --------------------------------------------------------------------------- reading


def read_input(
    path: str | Path,
    *,
    limit: int = MAX_FILE_BYTES,
    what: str = "file",
    stream: bool = False,
    budget_s: float = READ_BUDGET_S,
    for_readers: Iterable[Reader] = (),
) -> bytes:
    """The bytes of ``path``, at most ``limit`` of them, read within ``budget_s`` seconds.

    A regular file is always accepted; a FIFO or pipe only with ``stream`` (an NCCL log piped
    in); devices, sockets and directories never. ``for_readers`` (default: :func:`caller`) must
    each be able to read the file. DataFileError (naming the file) otherwise.
    """
    fd, regular = _open_checked(path, what=what, stream=stream, for_readers=for_readers)
    try:
        return _read_bounded(fd, printable(str(path)), limit, budget_s, regular)
    finally:
        os.close(fd)


def _open_checked(
    path: str | Path, *, what: str, stream: bool, for_readers: Iterable[Reader]
) -> tuple[int, bool]:
    """An open descriptor of ``path`` and whether it is a regular file, after the kind and
    rights checks (non-blocking open: a FIFO with no writer does not hang here)."""
    source = printable(str(path))
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise DataFileError([f"{source}: cannot read: {exc.strerror or exc}"]) from None
    try:
        st = os.fstat(fd)
        regular = stat.S_ISREG(st.st_mode)
        if not (regular or (stream and stat.S_ISFIFO(st.st_mode))):
            expected = "a regular file or a pipe" if stream else "a regular file"
            raise DataFileError(
                [f"{source}: is a {_kind_of(st.st_mode)}; expected {expected} ({what})"]
            )
        for r in list(for_readers) or [caller()]:
            if not r.may_read(st):
                raise DataFileError(
                    [
                        f"{source}: not readable by uid {r.uid} (mode {st.st_mode & 0o777:o}, "
                        f"owner uid {st.st_uid}); refusing to read it for them"
                    ]
                )
        if regular:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, regular


def _read_bounded(fd: int, source: str, limit: int, budget_s: float, regular: bool) -> bytes:
    deadline = time.monotonic() + budget_s
    parts: list[bytes] = []
    got = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise DataFileError(
                [f"{source}: still reading after {budget_s:g} s ({got} bytes); giving up"]
            )
        if not regular:
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if not ready:
                continue
        try:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - got))
        except BlockingIOError:
            continue
        except OSError as exc:
            raise DataFileError([f"{source}: cannot read: {exc.strerror or exc}"]) from None
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)
        got += len(chunk)
        if got > limit:
            raise DataFileError([f"{source}: larger than the limit of {limit} bytes"])


class _BoundedRaw(io.RawIOBase):
    """A file descriptor read at most ``limit`` bytes and until a deadline (DataFileError past
    either): what a line-by-line parser reads a possibly endless stream through."""

    def __init__(self, fd: int, source: str, limit: int, budget_s: float, regular: bool) -> None:
        self._fd = fd
        self._source = source
        self._limit = limit
        self._budget = budget_s
        self._deadline = time.monotonic() + budget_s
        self._regular = regular
        self.got = 0

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def readinto(self, buf: Any) -> int:
        view = memoryview(buf).cast("B")
        while True:
            left = self._deadline - time.monotonic()
            if left <= 0:
                raise DataFileError(
                    [
                        f"{self._source}: still reading after {self._budget:g} s ({self.got} "
                        "bytes); giving up"
                    ]
                )
            if not self._regular:
                ready, _, _ = select.select([self._fd], [], [], min(left, 1.0))
                if not ready:
                    continue
            try:
                n = os.readv(self._fd, [view[: min(len(view), self._limit + 1 - self.got)]])
            except BlockingIOError:
                continue
            except OSError as exc:
                raise DataFileError(
                    [f"{self._source}: cannot read: {exc.strerror or exc}"]
                ) from None
            self.got += n
            if self.got > self._limit:
                raise DataFileError(
                    [f"{self._source}: larger than the limit of {self._limit} bytes"]
                )
            return n

    def close(self) -> None:
        if not self.closed:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        super().close()


def open_text_input(
    path: str | Path,
    *,
    limit: int,
    what: str,
    stream: bool = False,
    budget_s: float = READ_BUDGET_S,
    for_readers: Iterable[Reader] = (),
) -> TextIO:
    """:func:`read_input`'s checks and bounds, as a text stream read line by line (undecodable
    bytes become U+FFFD); the bounds raise DataFileError from inside ``read``/``readline``."""
    fd, regular = _open_checked(path, what=what, stream=stream, for_readers=for_readers)
    raw = _BoundedRaw(fd, printable(str(path)), limit, budget_s, regular)
    return io.TextIOWrapper(io.BufferedReader(raw), encoding="utf-8", errors="replace", newline="")


def read_text(path: str | Path, *, what: str = "file", **kw: Any) -> str:
    """:func:`read_input` decoded as UTF-8 (DataFileError naming the byte otherwise)."""
    raw = read_input(path, what=what, **kw)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataFileError(
            [f"{printable(str(path))}: not UTF-8 text (byte {e.start}): expected {what}"]
        ) from None


def read_data_file(
    path: str | Path,
    *,
    what: str = "a YAML or JSON file",
    referenced_from: str | Path | None = None,
) -> tuple[Any, str]:
    """Read a YAML or JSON file (JSON for ``.json``) into plain data and its name for errors.

    ``referenced_from``: the file that named this one; it is then read only when both the
    caller and that file's owner may read it (no quoting of a file they could not open).
    """
    readers = [caller()]
    if referenced_from is not None:
        with contextlib.suppress(OSError):
            readers.append(owner_of(referenced_from))
    text = read_text(path, what=what, for_readers=readers)
    source = str(path)
    return parse_data_text(text, source, json_file=Path(path).suffix.lower() == ".json"), source


def parse_data_text(text: str, source: str, *, json_file: bool) -> Any:
    """Parse YAML or JSON text: DataFileError on bad syntax, deep nesting, an over-long
    integer or a duplicated key."""
    kind = "JSON" if json_file else "YAML"
    where = printable(source)
    depth = nesting_depth(text)
    if depth > MAX_NESTING:
        raise DataFileError([f"{where}: nests deeper than {MAX_NESTING} levels ({kind})"])
    try:
        if json_file:
            return parse_json(text, max_depth=MAX_NESTING, unique_keys=True)
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except JsonError as e:
        raise DataFileError([printable(f"{where}: not valid JSON: {e}")]) from None
    except _DuplicateKey as e:
        raise DataFileError([printable(f"{where}: {e}")]) from None
    except yaml.YAMLError as e:
        msg = " ".join(str(e).split())
        raise DataFileError([printable(f"{where}: not valid {kind}: {msg}")]) from None
    except (RecursionError, ValueError) as e:
        raise DataFileError(
            [printable(f"{where}: not valid {kind}: {str(e)[:200] or type(e).__name__}")]
        ) from None


def nesting_depth(text: str) -> int:
    """The deepest bracket or indentation nesting of YAML/JSON text (an upper-bound estimate,
    one linear pass; strings are not skipped, so it errs on the side of deeper)."""
    depth = deepest = 0
    for c in text:
        if c in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
        elif c in "]}":
            depth = max(depth - 1, 0)
    indent = 0
    for line in text.splitlines():
        stripped = line.lstrip(" -")
        if stripped and not stripped.startswith("#"):
            indent = max(indent, (len(line) - len(stripped)) // 2)
    return max(deepest, indent)


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_LONG_DIGITS = re.compile(f"[0-9]{{{MAX_INT_DIGITS + 1},}}")


def _check_json_bounds(text: str, max_depth: int) -> None:
    """JsonError when ``text`` nests deeper than ``max_depth`` or holds a number of more than
    ``MAX_INT_DIGITS`` digits (outside strings; linear, the scanning done by ``re`` in C)."""
    bare = _JSON_STRING.sub("", text)
    long = _LONG_DIGITS.search(bare)
    if long is not None:
        n = len(long.group())
        raise JsonError(f"a number of {n} digits (at most {MAX_INT_DIGITS})")
    steps = map(_STEP.__getitem__, _NOT_BRACKET.sub("", bare))
    deepest = max(itertools.accumulate(steps, initial=0))
    if deepest > max_depth:
        raise JsonError(f"nests deeper than {max_depth} levels")


def parse_json(
    text: str | bytes, *, max_depth: int = MAX_NESTING, unique_keys: bool = False
) -> Any:
    """Decode JSON with nesting at most ``max_depth`` and numbers of at most
    ``MAX_INT_DIGITS`` digits, checked before Python's own limits (RecursionError, the
    4300-digit ValueError) can fire. JsonError (one line, with the position) otherwise."""
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JsonError(f"not UTF-8: {exc.reason} at byte {exc.start}") from None
    _check_json_bounds(text, max_depth)
    try:
        return json.loads(text, object_pairs_hook=_unique_pairs if unique_keys else None)
    except json.JSONDecodeError as exc:
        raise JsonError(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except JsonError:
        raise
    except (RecursionError, ValueError) as exc:  # belt and braces: never a traceback
        raise JsonError(str(exc)[:200] or type(exc).__name__) from None


class _DuplicateKey(JsonError):
    """A mapping with the same key twice."""


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(f"key {k!r} appears twice in one object (expected each once)")
        out[k] = v
    return out


class _UniqueKeyLoader(yaml.SafeLoader):
    """yaml.SafeLoader that rejects a mapping with the same key twice (YAML 1.2 requires it)."""


def _construct_unique_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=False)
        try:
            dup = key in seen
        except TypeError:
            continue  # an unhashable key: construct_mapping reports it
        if dup:
            mark = key_node.start_mark
            raise _DuplicateKey(
                f"line {mark.line + 1}: key {key!r} appears twice in one mapping (expected each once)"
            )
        seen.add(key)
    return loader.construct_mapping(node)


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping
)


# --------------------------------------------------------------------------- writing


class UnsafeOutputError(OSError):
    """An output path the project refuses to write (a symlink, another user's file ...):
    ``strerror`` is the reason, ``filename`` the path, ``str()`` both as one line."""

    def __init__(self, path: str | Path, why: str) -> None:
        super().__init__(errno.EPERM, why, str(path))

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"


def check_output_dir(path: str | Path) -> Path:
    """Create the output folder ``path`` (and its parents) when missing; refuse a symlink that
    another user planted there, or something that is not a folder."""
    p = Path(path)
    p.mkdir(parents=True, exist_ok=True)
    st = os.lstat(p)
    if stat.S_ISLNK(st.st_mode):
        if st.st_uid not in (os.geteuid(), 0):
            raise UnsafeOutputError(
                p, f"a symlink owned by uid {st.st_uid}; refusing to write through it"
            )
        st = os.stat(p)
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeOutputError(p, "exists and is not a folder")
    return p


def write_output(path: str | Path, data: bytes | str, *, mode: int = 0o644) -> None:
    """Write ``data`` to the user-named ``path`` without following a link and without
    clobbering what this user did not create: an existing symlink, non-regular file or file of
    another uid is refused (UnsafeOutputError); otherwise a fresh ``O_EXCL|O_NOFOLLOW``
    temporary file in the same folder is renamed over it."""
    p = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        st: os.stat_result | None = os.lstat(p)
    except FileNotFoundError:
        st = None
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise UnsafeOutputError(p, "is a symlink; refusing to write through it")
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeOutputError(p, f"exists and is a {_kind_of(st.st_mode)}; not replaced")
        if st.st_uid != os.geteuid():
            raise UnsafeOutputError(
                p, f"belongs to uid {st.st_uid}, not to you (uid {os.geteuid()}); not replaced"
            )
    atomic_replace(p, raw, mode)


def is_no_space(exc: BaseException) -> bool:
    """Whether ``exc`` is a full disk or quota (for messages that say so)."""
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)
