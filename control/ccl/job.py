"""Job descriptions: which rank runs on which host and device, and what each phase communicates.

A job file (YAML or JSON) looks like::

    name: mixed-dp
    ranks:                       # rank i is the i-th entry
      - {host: h1, vendor: nvidia, device: A100}
      - {host: h2, vendor: biren, device: BR104}
    phases:
      - name: grad-allreduce
        collective: all-reduce   # all-reduce | all-gather | reduce-scatter | all-to-all | send-recv
        algorithm: ring          # ring | tree | halving-doubling (collectives only)
        channels: 2
        message_bytes: 256MiB    # an integer or a size with a unit (K, KiB, KB, M, MiB, MB, G ...)

Shorthand for ranks: ``hosts: [h1, h2]`` with optional ``ranks_per_host``, ``vendor`` and
``device`` gives rank ``i*ranks_per_host + j`` on host ``i``. A phase may name a subset of the
ranks (``ranks: [0, 2, 4]``, also the default ring order), explicit per-channel ``rings`` (rank
lists), per-channel ``trees`` (``{rank: parent}``, root has parent -1) and, for send-recv,
``pairs: [[src, dst], ...]`` (default: the chain of ``ranks``, like pipeline stages).

Limits (well above the 100,000-GPU benchmark; a job past one is rejected with the key and the
limit): ``MAX_RANKS`` ranks, ``MAX_RANKS_PER_HOST`` per host, ``MAX_PHASES`` phases,
``message_bytes`` 1 .. ``MAX_MESSAGE_BYTES`` and at most ``MAX_FLOWS`` network flows per job
(estimated before any is built: all-to-all over n ranks makes n(n-1) per channel).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from icefabric.files import printable, read_data_file
from icefabric.topo.spec import SpecError

COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "send-recv")
ALGORITHMS = ("ring", "tree", "halving-doubling")
_ALIASES = {
    "allreduce": "all-reduce",
    "allgather": "all-gather",
    "reducescatter": "reduce-scatter",
    "alltoall": "all-to-all",
    "sendrecv": "send-recv",
    "pipeline": "send-recv",
    "p2p": "send-recv",
    "halvingdoubling": "halving-doubling",
    "hd": "halving-doubling",
}
# Which algorithms each collective supports (NCCL runs all-gather/reduce-scatter as rings only).
SUPPORTED = {
    "all-reduce": ("ring", "tree", "halving-doubling"),
    "all-gather": ("ring", "halving-doubling"),
    "reduce-scatter": ("ring", "halving-doubling"),
    "all-to-all": (),
    "send-recv": (),
}
_UNITS = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kib": 1024,
    "kb": 1000,
    "m": 1024**2,
    "mib": 1024**2,
    "mb": 1000**2,
    "g": 1024**3,
    "gib": 1024**3,
    "gb": 1000**3,
    "t": 1024**4,
    "tib": 1024**4,
    "tb": 1000**4,
}
_SIZE_RE = re.compile(r"^\s*(\d{1,30}(?:\.\d{1,30})?)\s*([a-zA-Z]*)\s*$")
MAX_RANKS = 1 << 18  # 262,144
MAX_RANKS_PER_HOST = 256
MAX_PHASES = 1024
MAX_MESSAGE_BYTES = 1 << 48  # 256 TiB
MAX_FLOWS = 4_000_000  # per job
MAX_NAME_LEN = 128


class JobError(SpecError):
    """A job description failed validation; ``errors`` lists every problem."""


@dataclass(slots=True, frozen=True, kw_only=True)
class Rank:
    """One rank of a job: the host (NIC) it sends from and its accelerator."""

    rank: int
    host: str
    vendor: str = "nvidia"
    device: str = ""


@dataclass(slots=True, frozen=True, kw_only=True)
class Phase:
    """One communication phase: a collective (or point-to-point pattern) over some ranks."""

    name: str
    collective: str
    algorithm: str  # "" for all-to-all and send-recv
    channels: int
    message_bytes: int
    ranks: tuple[int, ...]  # participating ranks, in the default ring order
    rings: tuple[tuple[int, ...], ...] = ()  # explicit ring order per channel
    trees: tuple[Mapping[int, int], ...] = ()  # explicit {rank: parent} per channel
    pairs: tuple[tuple[int, int], ...] = ()  # send-recv (src, dst)


@dataclass(slots=True, frozen=True, kw_only=True)
class JobSpec:
    """A job: ranks on hosts and the phases it runs."""

    name: str
    ranks: tuple[Rank, ...]
    phases: tuple[Phase, ...] = field(default_factory=tuple)

    def host_of(self, rank: int) -> str:
        """The host that rank ``rank`` runs on."""
        return self.ranks[rank].host

    @property
    def hosts(self) -> tuple[str, ...]:
        """The distinct hosts of the job in rank order."""
        return tuple(dict.fromkeys(r.host for r in self.ranks))

    def to_dict(self) -> dict[str, Any]:
        """The job as plain data (the file format of this module's docstring)."""
        phases = []
        for p in self.phases:
            d: dict[str, Any] = {
                "name": p.name,
                "collective": p.collective,
                "channels": p.channels,
                "message_bytes": p.message_bytes,
                "ranks": list(p.ranks),
            }
            if p.algorithm:
                d["algorithm"] = p.algorithm
            if p.rings:
                d["rings"] = [list(r) for r in p.rings]
            if p.trees:
                d["trees"] = [{int(k): int(v) for k, v in t.items()} for t in p.trees]
            if p.pairs:
                d["pairs"] = [list(x) for x in p.pairs]
            phases.append(d)
        return {
            "name": self.name,
            "ranks": [{"host": r.host, "vendor": r.vendor, "device": r.device} for r in self.ranks],
            "phases": phases,
        }


def check_hosts(job: JobSpec, hosts: Iterable[str], *, topology: str = "the topology") -> list[str]:
    """Problems with ``job``'s hosts against the topology's host names (empty when all exist)."""
    known = set(hosts)
    return [
        f"job {job.name!r}: ranks[{r.rank}].host: no host {r.host!r} in {topology}"
        for r in job.ranks
        if r.host not in known
    ]


def parse_size(value: Any) -> int:
    """Bytes from an integer or a string like ``256MiB``, ``1GB``, ``128M`` (ValueError if bad)."""
    if isinstance(value, bool):
        raise ValueError(f"expected a size in bytes, got {value}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"expected a size >= 0, got {value}")
        return value
    if isinstance(value, float) and value >= 0 and value.is_integer():
        return int(value)
    if isinstance(value, str) and len(value) <= 64:
        m = _SIZE_RE.match(value)
        if m and m.group(2).lower() in _UNITS:
            return int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
    raise ValueError(f"expected a size like 1048576, 256MiB or 1GB, got {shown}")


def canonical_collective(name: str) -> str:
    """Normalise a collective name (``allreduce``, ``AllReduce`` -> ``all-reduce``)."""
    k = name.strip().lower().replace("_", "-")
    return _ALIASES.get(k.replace("-", ""), k)


def canonical_algorithm(name: str) -> str:
    """Normalise an algorithm name (``Ring`` -> ``ring``, ``hd`` -> ``halving-doubling``)."""
    k = name.strip().lower().replace("_", "-")
    return _ALIASES.get(k.replace("-", ""), k)


def load_job(path: str | Path, *, referenced_from: str | Path | None = None) -> JobSpec:
    """Load and validate a job description from a YAML or JSON file (``referenced_from``: the
    file that named it, whose owner must be able to read it too)."""
    try:
        data, source = read_data_file(path, what="a job file", referenced_from=referenced_from)
    except SpecError as e:
        raise JobError(e.errors) from e
    return parse_job(data, source=source)


def parse_job(data: Any, source: str = "<job>") -> JobSpec:
    """Validate plain data (a parsed job file or an API payload) and build a JobSpec."""
    errs: list[str] = []

    def err(key: str, msg: str) -> None:
        errs.append(printable(f"{source}: {key}: {msg}"))

    if not isinstance(data, Mapping):
        raise JobError([f"{source}: (top level): expected a mapping, got {type(data).__name__}"])
    allowed = {"name", "ranks", "hosts", "ranks_per_host", "vendor", "device", "phases"}
    for k in data:
        if k not in allowed:
            err(str(k), f"unknown key (expected one of {', '.join(sorted(allowed))})")
    name = data.get("name")
    problem = _name_problem(name)
    if problem:
        err("name", problem)
    name = "" if problem else str(name)
    ranks = _parse_ranks(data, err)
    n = len(ranks)
    phases_raw = data.get("phases")
    phases: list[Phase] = []
    if not isinstance(phases_raw, list) or not phases_raw:
        err("phases", "expected a non-empty list of phases")
    elif len(phases_raw) > MAX_PHASES:
        err("phases", f"expected at most {MAX_PHASES} phases, got {len(phases_raw)}")
    else:
        seen: dict[str, int] = {}
        for i, p in enumerate(phases_raw):
            ph = _parse_phase(p, f"phases[{i}]", n, err)
            if ph is not None:
                if ph.name in seen:
                    err(
                        f"phases[{i}].name",
                        f"name {ph.name!r} is already used by phases[{seen[ph.name]}]",
                    )
                seen[ph.name] = i
                phases.append(ph)
    if not errs:
        total = sum(estimate_flows(ph) for ph in phases)
        if total > MAX_FLOWS:
            err("phases", f"the job would create {total} network flows; the limit is {MAX_FLOWS}")
    if errs:
        raise JobError(errs)
    return JobSpec(name=name, ranks=tuple(ranks), phases=tuple(phases))


def estimate_flows(phase: Phase) -> int:
    """An upper bound on the network flows ``phase`` creates (before building any)."""
    n = len(phase.ranks)
    per_channel = {
        "all-to-all": n * (n - 1),
        "send-recv": len(phase.pairs),
    }.get(phase.collective)
    if per_channel is None:
        if phase.algorithm == "tree":
            per_channel = 2 * n
        elif phase.algorithm == "halving-doubling":
            per_channel = 2 * n * max(n.bit_length(), 1)
        else:
            per_channel = n
    return per_channel * phase.channels


def _name_problem(name: Any) -> str:
    """Why ``name`` is no job or phase name ("" when it is one)."""
    if not isinstance(name, str) or not name or "/" in name:
        return f"expected a non-empty string without '/', got {_short(name)}"
    if len(name) > MAX_NAME_LEN or not name.isprintable():
        return f"expected at most {MAX_NAME_LEN} printable characters, got {_short(name)}"
    return ""


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _parse_ranks(data: Mapping[str, Any], err: Any) -> list[Rank]:
    ranks: list[Rank] = []
    if "ranks" in data and "hosts" in data:
        err("hosts", "give either ranks or hosts, not both")
        return ranks
    if "hosts" in data:
        hosts = data["hosts"]
        rph = data.get("ranks_per_host", 1)
        if isinstance(rph, bool) or not isinstance(rph, int) or not 1 <= rph <= MAX_RANKS_PER_HOST:
            err("ranks_per_host", f"expected an integer 1..{MAX_RANKS_PER_HOST}, got {_short(rph)}")
            rph = 1
        vendor = data.get("vendor", "nvidia")
        device = data.get("device", "")
        if not isinstance(vendor, str) or not isinstance(device, str):
            err("vendor", "expected strings for vendor and device")
            vendor, device = "nvidia", ""
        if not isinstance(hosts, list) or not hosts:
            err("hosts", "expected a non-empty list of host names")
            return ranks
        if len(hosts) * rph > MAX_RANKS:
            err("hosts", f"{len(hosts)} hosts x {rph} ranks exceeds the limit of {MAX_RANKS} ranks")
            return ranks
        for i, h in enumerate(hosts):
            if not isinstance(h, str) or not h:
                err(f"hosts[{i}]", f"expected a host name, got {h!r}")
                continue
            for _ in range(rph):
                ranks.append(Rank(rank=len(ranks), host=h, vendor=vendor, device=device))
        return ranks
    if "ranks_per_host" in data:
        err("ranks_per_host", "only used with hosts: [...]")
    raw = data.get("ranks")
    if not isinstance(raw, list) or not raw:
        err("ranks", "expected a non-empty list of {host, vendor, device} (or hosts: [...])")
        return ranks
    if len(raw) > MAX_RANKS:
        err("ranks", f"expected at most {MAX_RANKS} ranks, got {len(raw)}")
        return ranks
    for i, r in enumerate(raw):
        key = f"ranks[{i}]"
        if isinstance(r, str):
            r = {"host": r}
        if not isinstance(r, Mapping):
            err(key, f"expected a mapping {{host, vendor, device}}, got {type(r).__name__}")
            continue
        for k in r:
            if k not in ("rank", "host", "vendor", "device"):
                err(f"{key}.{k}", "unknown key (expected one of device, host, rank, vendor)")
        if "rank" in r and r["rank"] != i:
            err(f"{key}.rank", f"ranks are listed in order: expected {i}, got {r['rank']!r}")
        host = r.get("host")
        if not isinstance(host, str) or not host:
            err(f"{key}.host", f"expected a host name, got {host!r}")
            continue
        vendor = r.get("vendor", data.get("vendor", "nvidia"))
        device = r.get("device", data.get("device", ""))
        if not isinstance(vendor, str) or not vendor:
            err(f"{key}.vendor", f"expected a vendor name such as nvidia, got {vendor!r}")
            vendor = "nvidia"
        if not isinstance(device, str):
            err(f"{key}.device", f"expected a device type string, got {device!r}")
            device = ""
        ranks.append(Rank(rank=i, host=host, vendor=vendor, device=device))
    return ranks


def _rank_list(v: Any, key: str, n: int, err: Any) -> tuple[int, ...] | None:
    if not isinstance(v, list) or not v:
        err(key, "expected a non-empty list of ranks")
        return None
    out = []
    for j, x in enumerate(v):
        if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x < n:
            err(f"{key}[{j}]", f"expected a rank 0..{n - 1}, got {x!r}")
            return None
        out.append(x)
    if len(set(out)) != len(out):
        err(key, "expected each rank once")
        return None
    return tuple(out)


def _parse_phase(p: Any, key: str, n: int, err: Any) -> Phase | None:
    if not isinstance(p, Mapping):
        err(key, f"expected a mapping, got {type(p).__name__}")
        return None
    allowed = {
        "name",
        "collective",
        "algorithm",
        "channels",
        "message_bytes",
        "ranks",
        "rings",
        "trees",
        "pairs",
    }
    for k in p:
        if k not in allowed:
            err(f"{key}.{k}", f"unknown key (expected one of {', '.join(sorted(allowed))})")
    ok = True
    name = p.get("name", "phase" + key[len("phases[") : -1])
    problem = _name_problem(name)
    if problem:
        err(f"{key}.name", problem)
        ok = False
    coll_raw = p.get("collective")
    coll = canonical_collective(coll_raw) if isinstance(coll_raw, str) else ""
    if coll not in COLLECTIVES:
        err(f"{key}.collective", f"expected one of {', '.join(COLLECTIVES)}, got {coll_raw!r}")
        return None
    supported = SUPPORTED[coll]
    alg_raw = p.get("algorithm", supported[0] if supported else "")
    alg = canonical_algorithm(alg_raw) if isinstance(alg_raw, str) else "?"
    if supported and alg not in supported:
        err(f"{key}.algorithm", f"{coll} runs as {', '.join(supported)}, got {alg_raw!r}")
        ok = False
    if not supported and alg:
        err(f"{key}.algorithm", f"{coll} takes no algorithm, got {alg_raw!r}")
        ok = False
    ch = p.get("channels", 1)
    if isinstance(ch, bool) or not isinstance(ch, int) or not 1 <= ch <= 64:
        err(f"{key}.channels", f"expected an integer 1..64, got {ch!r}")
        ok = False
    try:
        size = parse_size(p.get("message_bytes"))
        if not 1 <= size <= MAX_MESSAGE_BYTES:
            raise ValueError(f"expected 1 .. {MAX_MESSAGE_BYTES} bytes (256 TiB), got {size}")
    except (ValueError, OverflowError) as e:
        err(f"{key}.message_bytes", str(e))
        ok = False
        size = 0
    ranks = tuple(range(n)) if "ranks" not in p else _rank_list(p["ranks"], f"{key}.ranks", n, err)
    if ranks is None or not ok:
        return None
    if coll != "send-recv" and len(ranks) < 2:
        err(f"{key}.ranks", f"{coll} needs at least 2 ranks, got {len(ranks)}")
        return None
    if alg == "halving-doubling" and len(ranks) & (len(ranks) - 1):
        err(f"{key}.ranks", f"halving-doubling needs a power-of-two rank count, got {len(ranks)}")
        return None
    rings = _phase_rings(p, key, alg, ch, ranks, n, err)
    if rings is None:
        return None
    trees = _phase_trees(p, key, alg, ch, ranks, err)
    if trees is None:
        return None
    pairs = _phase_pairs(p, key, coll, ranks, n, err)
    if pairs is None:
        return None
    return Phase(
        name=name,
        collective=coll,
        algorithm=alg,
        channels=ch,
        message_bytes=size,
        ranks=ranks,
        rings=tuple(rings),
        trees=tuple(trees),
        pairs=tuple(pairs),
    )


def _phase_rings(
    p: Mapping[str, Any], key: str, alg: str, ch: int, ranks: tuple[int, ...], n: int, err: Any
) -> list[tuple[int, ...]] | None:
    """A phase's ``rings`` (one permutation of its ranks per channel); None: an error said."""
    rings: list[tuple[int, ...]] = []
    if "rings" in p:
        if alg != "ring":
            err(f"{key}.rings", f"rings are given only for algorithm ring, got {alg!r}")
            return None
        raw = p["rings"]
        if not isinstance(raw, list) or len(raw) != ch:
            err(f"{key}.rings", f"expected one ring per channel ({ch}), got {raw!r}"[:200])
            return None
        for c, r in enumerate(raw):
            ring = _rank_list(r, f"{key}.rings[{c}]", n, err)
            if ring is None:
                return None
            if set(ring) != set(ranks):
                err(f"{key}.rings[{c}]", "expected a permutation of the phase's ranks")
                return None
            rings.append(ring)
    return rings


def _phase_trees(
    p: Mapping[str, Any], key: str, alg: str, ch: int, ranks: tuple[int, ...], err: Any
) -> list[dict[int, int]] | None:
    """A phase's ``trees`` (one {rank: parent} per channel); None: an error said."""
    trees: list[dict[int, int]] = []
    if "trees" in p:
        if alg != "tree":
            err(f"{key}.trees", f"trees are given only for algorithm tree, got {alg!r}")
            return None
        raw = p["trees"]
        if not isinstance(raw, list) or len(raw) != ch:
            err(f"{key}.trees", f"expected one {{rank: parent}} mapping per channel ({ch})")
            return None
        for c, t in enumerate(raw):
            tree = _parse_tree(t, f"{key}.trees[{c}]", set(ranks), err)
            if tree is None:
                return None
            trees.append(tree)
    return trees


def _phase_pairs(
    p: Mapping[str, Any], key: str, coll: str, ranks: tuple[int, ...], n: int, err: Any
) -> list[tuple[int, int]] | None:
    """A send-recv phase's ``pairs`` (given, or its ranks chained); None: an error said."""
    pairs: list[tuple[int, int]] = []
    if "pairs" in p:
        if coll != "send-recv":
            err(f"{key}.pairs", f"pairs are given only for send-recv, got {coll!r}")
            return None
        raw = p["pairs"]
        if not isinstance(raw, list) or not raw:
            err(f"{key}.pairs", "expected a non-empty list of [src, dst] rank pairs")
            return None
        for j, pr in enumerate(raw):
            if (
                not isinstance(pr, Sequence)
                or isinstance(pr, str)
                or len(pr) != 2
                or any(isinstance(x, bool) or not isinstance(x, int) or not 0 <= x < n for x in pr)
            ):
                err(f"{key}.pairs[{j}]", f"expected [src, dst] with ranks 0..{n - 1}, got {pr!r}")
                return None
            if pr[0] == pr[1]:
                err(f"{key}.pairs[{j}]", f"expected two different ranks, got {list(pr)}")
                return None
            pairs.append((int(pr[0]), int(pr[1])))
    elif coll == "send-recv":
        if len(ranks) < 2:
            err(f"{key}.ranks", "send-recv needs pairs or at least 2 ranks to chain")
            return None
        pairs = list(itertools.pairwise(ranks))
    return pairs


def _tree_int(v: Any) -> int | None:
    """An integer rank from a tree key or value (an int, or a decimal string for JSON keys);
    None for anything else (1.9 is no rank)."""
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, str) and re.fullmatch(r"-?\d{1,9}", v.strip()):
        return int(v)
    return None


def _parse_tree(t: Any, key: str, ranks: set[int], err: Any) -> dict[int, int] | None:
    if not isinstance(t, Mapping):
        err(key, "expected a mapping {rank: parent}")
        return None
    tree: dict[int, int] = {}
    for k, v in t.items():
        r, par = _tree_int(k), _tree_int(v)
        if r is None or par is None:
            err(
                f"{key}.{_short(k)}", f"expected integer rank: parent, got {_short(k)}: {_short(v)}"
            )
            return None
        if r not in ranks or (par != -1 and par not in ranks):
            err(
                f"{key}.{k}",
                f"expected ranks of the phase (parent -1 for the root), got {r}: {par}",
            )
            return None
        tree[r] = par
    if set(tree) != ranks:
        err(key, f"expected every rank of the phase once, missing {sorted(ranks - set(tree))}")
        return None
    roots = [r for r, par in tree.items() if par == -1]
    if len(roots) != 1:
        err(key, f"expected exactly one root (parent -1), got {len(roots)}")
        return None
    for r in tree:  # every rank must reach the root without a cycle
        seen = set()
        x = r
        while x != -1:
            if x in seen:
                err(key, f"parent links form a cycle through rank {x}")
                return None
            seen.add(x)
            x = tree[x]
    return tree
