"""HCCL (Ascend) rank tables: the JSON file mapping ranks to servers and NPUs, as job ranks.

Two layouts are read. Version 1.0 and later (``"version": "1.0"``)::

    {"version": "1.0", "server_count": "2", "status": "completed",
     "server_list": [{"server_id": "10.0.0.10",
                      "device": [{"device_id": "0", "device_ip": "192.168.100.101",
                                  "rank_id": "0"}, ...]}, ...]}

and the older ``group_list`` layout, one instance (rank) per entry::

    {"group_count": "1", "group_list": [{"group_name": "", "instance_count": "8",
      "instance_list": [{"rank_id": "0", "server_id": "10.0.0.10",
                         "devices": [{"device_id": "0", "device_ip": "192.168.0.12"}]}]}]}

Numbers may be JSON strings (as HCCL writes them) or integers. Each rank 0..n-1 must appear once.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from icefabric.control.ccl.job import Rank
from icefabric.control.ccl.nccl.formats import MAX_RANKS
from icefabric.files import DataFileError, JsonError, parse_json, printable, read_input

MAX_RANK_TABLE_BYTES = 64 << 20


class RankTableError(ValueError):
    """A rank table that cannot be used (the message names the file and the field)."""


@dataclass(slots=True, frozen=True)
class RankTable:
    """The ranks of an HCCL rank table, rank order."""

    source: str
    ranks: tuple[Rank, ...]
    device_ips: tuple[str, ...]


def looks_like_rank_table(path: str | Path) -> bool:
    """True when the file starts like a JSON object (a rank table rather than a text log)."""
    try:  # non-blocking: a FIFO with no writer must not hang the check
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        head = os.read(fd, 64).lstrip()
    except OSError:
        return False
    finally:
        os.close(fd)
    return head.startswith(b"{")


def _num(v: Any, where: str) -> int:
    if isinstance(v, bool):
        raise RankTableError(f"{where}: expected a number, got {v!r}")
    if isinstance(v, int):
        n = v
    elif isinstance(v, str) and v.strip().isdigit() and len(v.strip()) <= 12:
        n = int(v.strip())
    else:
        raise RankTableError(f"{where}: expected a number, got {v!r}"[:200])
    if not 0 <= n < MAX_RANKS:
        raise RankTableError(f"{where}: {n} outside 0..{MAX_RANKS - 1}")
    return n


def _str(v: Any, where: str) -> str:
    if not isinstance(v, str) or not v or len(v) > 255:
        raise RankTableError(f"{where}: expected a non-empty name, got {v!r}"[:200])
    return v


def parse_rank_table(data: Any, source: str = "<rank table>") -> RankTable:
    """Ranks (host = server_id, device ``npu<device_id>``) from a parsed rank table."""
    if not isinstance(data, dict):
        raise RankTableError(f"{source}: (top level): expected a JSON object")
    found: dict[int, tuple[str, int, str, str]] = {}

    def add(rank: int, server: str, dev: int, ip: str, where: str) -> None:
        if rank in found:
            raise RankTableError(f"{where}.rank_id: rank {rank} appears twice")
        if len(found) >= MAX_RANKS:
            raise RankTableError(f"{source}: more than {MAX_RANKS} ranks")
        found[rank] = (server, dev, ip, where)

    if "server_list" in data:
        servers = data["server_list"]
        if not isinstance(servers, list):
            raise RankTableError(f"{source}: server_list: expected a list")
        for i, s in enumerate(servers):
            w = f"{source}: server_list[{i}]"
            if not isinstance(s, dict):
                raise RankTableError(f"{w}: expected an object")
            server = _str(s.get("server_id"), f"{w}.server_id")
            devs = s.get("device")
            if not isinstance(devs, list):
                raise RankTableError(f"{w}.device: expected a list of devices")
            for j, d in enumerate(devs):
                wd = f"{w}.device[{j}]"
                if not isinstance(d, dict):
                    raise RankTableError(f"{wd}: expected an object")
                ip = d.get("device_ip", "")
                add(
                    _num(d.get("rank_id"), f"{wd}.rank_id"),
                    server,
                    _num(d.get("device_id"), f"{wd}.device_id"),
                    ip if isinstance(ip, str) else "",
                    wd,
                )
    elif "group_list" in data:
        groups = data["group_list"]
        if not isinstance(groups, list):
            raise RankTableError(f"{source}: group_list: expected a list")
        for i, g in enumerate(groups):
            w = f"{source}: group_list[{i}]"
            insts = g.get("instance_list") if isinstance(g, dict) else None
            if not isinstance(insts, list):
                raise RankTableError(f"{w}.instance_list: expected a list")
            for j, inst in enumerate(insts):
                wi = f"{w}.instance_list[{j}]"
                if not isinstance(inst, dict):
                    raise RankTableError(f"{wi}: expected an object")
                devs = inst.get("devices")
                if not isinstance(devs, list) or len(devs) != 1 or not isinstance(devs[0], dict):
                    raise RankTableError(f"{wi}.devices: expected one device per instance")
                ip = devs[0].get("device_ip", "")
                add(
                    _num(inst.get("rank_id"), f"{wi}.rank_id"),
                    _str(inst.get("server_id"), f"{wi}.server_id"),
                    _num(devs[0].get("device_id"), f"{wi}.devices[0].device_id"),
                    ip if isinstance(ip, str) else "",
                    wi,
                )
    else:
        raise RankTableError(
            f"{source}: expected an HCCL rank table (server_list or group_list), got keys "
            f"{', '.join(sorted(map(str, data)))[:200]}"
        )
    if not found:
        raise RankTableError(f"{source}: the rank table lists no ranks")
    n = len(found)
    missing = [r for r in range(n) if r not in found]
    if missing:
        raise RankTableError(
            f"{source}: rank_id values must be 0..{n - 1}; missing {missing[:20]}"
            + (f" and {len(missing) - 20} more" if len(missing) > 20 else "")
        )
    ranks = tuple(
        Rank(rank=r, host=found[r][0], vendor="huawei", device=f"npu{found[r][1]}")
        for r in range(n)
    )
    return RankTable(source, ranks, tuple(found[r][2] for r in range(n)))


def load_rank_table(path: str | Path) -> RankTable:
    """Read and check a rank table file."""
    try:
        raw = read_input(path, limit=MAX_RANK_TABLE_BYTES, what="an HCCL rank table")
        data = parse_json(raw)
    except DataFileError as e:
        raise RankTableError(str(e).splitlines()[0]) from None
    except JsonError as e:
        raise RankTableError(printable(f"{path}: not a JSON rank table: {e}")) from None
    return parse_rank_table(data, str(path))
