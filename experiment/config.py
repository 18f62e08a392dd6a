"""The experiment file: topology + workload + modes + seed + link rates, validated on load.

Format (experiment/README.md, "Experiment files", is the reference)::

    name: ecmp-collides               # required: letters, digits, _ . -
    description: free text            # optional
    topology:                         # exactly one of:
      file: topo/examples/leaf_spine_2x4.yaml      # a spec (relative to this file, then the repo)
      leaf_spine: {leaves: 4, spines: 2, hosts_per_leaf: 2}   # icefabric.topo.generators
    workload:                         # exactly one of job / nccl_log / collective:
      job: control/ccl/examples/mixed_dp_allreduce.yaml  # a job file, or the job inline
      nccl_log: {file: x.log, collective: all-reduce, message_bytes: 8MiB, host_map: {n1: h1}}
      collective: all-reduce          # shorthand: one phase over `hosts`
      algorithm: ring
      channels: 2
      message_bytes: 8MiB
      hosts: interleaved              # interleaved (ring neighbours on other leaves) | all | [h1, ...]
      slices: 1                       # messages per transfer (pipelining), default 1
    modes: [ecmp+dcqcn, ice]          # default; any packet-level mode of traffic/modes.py
    seed: 1                           # default 1
    rates:
      scale: 0.001                    # link rate in the run = spec rate x scale (default 0.001)
      mtu_bytes: 4096                 # RoCEv2 payload per packet (default 4096)
      link_delay_us: 1.0              # one-way delay of links without delay_us, at the spec's
                                      # rates (default 1); every delay runs x 1/scale
      control_delay_us: 100.0         # controller -> agent cap delivery at the spec's rates
                                      # (default 100; x 1/scale like every time constant)
    engine: virtual                   # virtual (default) | mininet
    target: embedded                  # the switches: embedded (ice-switch, default) | bmv2
                                      # (simple_switch_grpc; engine mininet only)
    limits: {virtual_ms: 60000, wall_s: 600}  # give up (mode fails) past either
    ice: {anchor: true, derived_ai: true, eta: 0.95, sample_n: 32, sample_gap: 0, starts: true}
                                      # ICE's end-side rule and INT sampling: 1 in sample_n
                                      # packets and at least one per sample_gap base RTTs
                                      # (traffic/README.md); starts: unplanned flows start at
                                      # what the caps leave on their paths;
                                      # the defaults; anchor false: HPCC's rule on caps that
                                      # fill links to 95 % (the rule before the anchoring)
    jobs:                             # optional (engine virtual): more jobs sharing the fabric
      - {collective: all-reduce, hosts: [h3, h6], name: job-b}   # (at most 7), each a mapping
                                      # like workload (job / nccl_log / collective, slices) with
                                      # its own name;
                                      # they start with the workload (or arrive at start_us:
                                      # the spec's time, x 1/scale; the controller learns such a
                                      # job as it arrives: planned and capped from then on),
                                      # are planned and capped like it, and the score is the
                                      # mean of every job's busbw ÷ bound
    background:                       # optional: flows the controller does not know (engine
      - {src: h3, dst: h9, bytes: 8MiB}   # virtual): posted when the job starts, never
                                      # planned or capped (ice.p4's flowlet / ECMP places them)
    link_down: {a: leaf1, b: spine1, at_us: 150, drain_us: 20}  # optional (engine virtual):
                                      # the controller is told the link is down at at_us (the
                                      # spec's time, x 1/scale like every delay), the link stops
                                      # drain_us later (0: at once; packets on it are then lost)

Every problem is reported at once as ``file: key: message`` (:class:`ExperimentError`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from icefabric.control.ccl.job import parse_size
from icefabric.experiment.jobs_config import more_jobs, resolve, workload
from icefabric.experiment.spec import (  # re-exported: the experiment as data
    _DEF_LIMITS,
    _DEF_RATES,
    ENGINES,
    MAX_BACKGROUND,
    ROOT,
    TARGETS,
    Background,
    Experiment,
    ExperimentError,
    IceKnobs,
    Limits,
    LinkDown,
    Rates,
    packet_modes,
    run_topology,
)
from icefabric.files import read_data_file
from icefabric.topo.spec import SpecError, TopologySpec, load_topology
from icefabric.traffic.modes import DEFAULT_MODES, MODES, Mode, ModeError, get_mode

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

# One definition of a mode for every engine (traffic/modes.py); re-exported for the engines here.
__all__ = [
    "DEFAULT_MODES",
    "ENGINES",
    "MAX_BACKGROUND",
    "MODES",
    "ROOT",
    "TARGETS",
    "Background",
    "Experiment",
    "ExperimentError",
    "IceKnobs",
    "Limits",
    "LinkDown",
    "Mode",
    "Rates",
    "packet_modes",
    "run_topology",
]


def load_experiment(path: str | Path) -> Experiment:
    """Load and validate an experiment file (YAML or JSON)."""
    try:
        data, source = read_data_file(path)
    except SpecError as e:
        raise ExperimentError(e.errors) from e
    return parse_experiment(data, source=source, base=Path(path).resolve().parent)


def parse_experiment(
    data: Any, *, source: str = "<experiment>", base: Path | None = None
) -> Experiment:
    """Validate plain data and build an :class:`Experiment` (paths relative to ``base``)."""
    errs: list[str] = []

    def err(key: str, msg: str) -> None:
        errs.append(f"{source}: {key}: {msg}")

    if not isinstance(data, Mapping):
        raise ExperimentError(
            [f"{source}: (top level): expected a mapping, got {type(data).__name__}"]
        )
    allowed = {
        "name",
        "description",
        "topology",
        "workload",
        "modes",
        "seed",
        "rates",
        "engine",
        "target",
        "limits",
        "ice",
        "background",
        "link_down",
        "jobs",
    }
    for k in data:
        if k not in allowed:
            err(str(k), f"unknown key (expected one of {', '.join(sorted(allowed))})")
    name = data.get("name")
    if not isinstance(name, str) or not _NAME_RE.match(name):
        err(
            "name",
            f"expected 1-64 letters, digits, _ . - (starting with a letter or digit), got {name!r}",
        )
        name = "experiment"
    desc = data.get("description", "")
    if not isinstance(desc, str):
        err("description", f"expected a string, got {type(desc).__name__}")
        desc = ""
    # Files named inside this one are read only when its owner may read them too (root running
    # another user's experiment must not read, or quote, a file that user could not).
    ref = source if base is not None else None
    topo = _topology(data.get("topology"), base, err, ref)
    job, slices = workload(data.get("workload"), topo, base, err, ref)
    modes = _modes(data.get("modes", list(DEFAULT_MODES)), err)
    seed = data.get("seed", 1)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        err("seed", f"expected an integer 0..2^32-1, got {seed!r}")
        seed = 1
    rates = _rates(data.get("rates", {}), err)
    engine = data.get("engine", "virtual")
    if engine not in ENGINES:
        err("engine", f"expected one of {', '.join(ENGINES)}, got {engine!r}")
        engine = "virtual"
    target = data.get("target", "embedded")
    if target not in TARGETS:
        err("target", f"expected one of {', '.join(TARGETS)}, got {target!r}")
        target = "embedded"
    elif target != "embedded" and engine != "mininet":
        err("target", f"{target} runs on engine mininet only (the virtual engine is embedded)")
    limits = _limits(data.get("limits", {}), err)
    ice = _ice(data.get("ice", {}), err)
    background = _background(data.get("background", []), topo, err)
    link_down = _link_down(data.get("link_down"), topo, err)
    if (background or link_down) and engine != "virtual":
        err("engine", "background and link_down run on engine virtual only")
    extra_jobs, job_starts = more_jobs(data.get("jobs", []), job, topo, base, err, ref)
    if extra_jobs and engine != "virtual":
        err("engine", "jobs (more than one job) run on engine virtual only")
    if errs or topo is None or job is None:
        raise ExperimentError(errs or [f"{source}: (top level): incomplete experiment"])
    return Experiment(
        name=name,
        description=desc,
        source=source,
        topology=topo,
        job=job,
        slices=slices,
        modes=modes,
        seed=seed,
        rates=rates,
        engine=engine,
        target=target,
        limits=limits,
        data=dict(data),
        ice=ice,
        background=background,
        link_down=link_down,
        more_jobs=extra_jobs,
        job_starts=job_starts,
    )


def _topology(raw: Any, base: Path | None, err: Any, ref: str | None) -> TopologySpec | None:
    from icefabric.topo import generators

    if (
        not isinstance(raw, Mapping)
        or len(raw) != 1
        or next(iter(raw)) not in ("file", "leaf_spine", "fat_tree")
    ):
        err("topology", "expected a mapping with one key: file, leaf_spine or fat_tree")
        return None
    kind, value = next(iter(raw.items()))
    try:
        if kind == "file":
            if not isinstance(value, str):
                err("topology.file", f"expected a path, got {value!r}")
                return None
            return load_topology(resolve(value, base), referenced_from=ref)
        if not isinstance(value, Mapping):
            err(f"topology.{kind}", "expected a mapping of generator arguments")
            return None
        if kind == "leaf_spine":
            return generators.leaf_spine(**{str(k): v for k, v in value.items()})
        k = value.get("k")
        if isinstance(k, bool) or not isinstance(k, int):
            err("topology.fat_tree.k", f"expected an even integer, got {k!r}")
            return None
        return generators.fat_tree(k, **{str(a): v for a, v in value.items() if a != "k"})
    except SpecError as e:
        for line in e.errors:
            err(f"topology.{kind}", line)
    except (TypeError, ValueError) as e:
        err(f"topology.{kind}", str(e))
    return None


def _modes(raw: Any, err: Any) -> tuple[str, ...]:
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not raw:
        err("modes", f"expected a non-empty list of {', '.join(packet_modes())}")
        return DEFAULT_MODES
    out = []
    known = packet_modes()
    for i, m in enumerate(raw):
        if m not in known and not _composed_packet_mode(m):
            hint = " (simulator only: icectl sim)" if m in MODES else ""
            err(
                f"modes[{i}]",
                f"expected one of {', '.join(known)} or BALANCE+RATE (traffic/modes.py), "
                f"got {m!r}{hint}",
            )
        elif m in out:
            err(f"modes[{i}]", f"{m} is listed twice")
        else:
            out.append(m)
    return tuple(out) or DEFAULT_MODES


def _composed_packet_mode(name: object) -> bool:
    """``name`` is a BALANCE+RATE mode (traffic/modes.py get_mode) a packet engine carries."""
    if not isinstance(name, str) or name in MODES:
        return False
    try:
        m = get_mode(name)
    except ModeError:
        return False
    return "virtual" in m.engines or "mininet" in m.engines


def _number(v: Any, key: str, err: Any, lo: float, hi: float, default: float) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo < v <= hi:
        err(key, f"expected a number in ({lo:g}, {hi:g}], got {v!r}")
        return default
    return float(v)


def _rates(raw: Any, err: Any) -> Rates:
    if not isinstance(raw, Mapping):
        err("rates", "expected a mapping {scale, mtu_bytes}")
        return Rates()
    for k in raw:
        if k not in ("scale", "mtu_bytes", "link_delay_us", "control_delay_us"):
            err(
                f"rates.{k}",
                "unknown key (expected one of control_delay_us, link_delay_us, mtu_bytes, scale)",
            )
    scale = _number(
        raw.get("scale", _DEF_RATES.scale), "rates.scale", err, 0.0, 1.0, _DEF_RATES.scale
    )
    mtu = raw.get("mtu_bytes", _DEF_RATES.mtu_bytes)
    if isinstance(mtu, bool) or not isinstance(mtu, int) or not 256 <= mtu <= 9000:
        err("rates.mtu_bytes", f"expected an integer 256..9000, got {mtu!r}")
        mtu = _DEF_RATES.mtu_bytes
    delay = raw.get("link_delay_us", _DEF_RATES.link_delay_us)
    if isinstance(delay, bool) or not isinstance(delay, (int, float)) or not 0 <= delay <= 1e6:
        err("rates.link_delay_us", f"expected a number of microseconds 0..1e6, got {delay!r}")
        delay = _DEF_RATES.link_delay_us
    cdelay = raw.get("control_delay_us", _DEF_RATES.control_delay_us)
    if isinstance(cdelay, bool) or not isinstance(cdelay, (int, float)) or not 0 <= cdelay <= 1e6:
        err("rates.control_delay_us", f"expected a number of microseconds 0..1e6, got {cdelay!r}")
        cdelay = _DEF_RATES.control_delay_us
    return Rates(
        scale=scale, mtu_bytes=mtu, link_delay_us=float(delay), control_delay_us=float(cdelay)
    )


def _limits(raw: Any, err: Any) -> Limits:
    if not isinstance(raw, Mapping):
        err("limits", "expected a mapping {virtual_ms, wall_s}")
        return Limits()
    for k in raw:
        if k not in ("virtual_ms", "wall_s"):
            err(f"limits.{k}", "unknown key (expected one of virtual_ms, wall_s)")
    return Limits(
        virtual_ms=_number(
            raw.get("virtual_ms", _DEF_LIMITS.virtual_ms),
            "limits.virtual_ms",
            err,
            0.0,
            1e9,
            _DEF_LIMITS.virtual_ms,
        ),
        wall_s=_number(
            raw.get("wall_s", _DEF_LIMITS.wall_s),
            "limits.wall_s",
            err,
            0.0,
            86400.0,
            _DEF_LIMITS.wall_s,
        ),
    )


def _ice(raw: Any, err: Any) -> IceKnobs:
    if not isinstance(raw, Mapping):
        err("ice", "expected a mapping {anchor, derived_ai, eta}")
        return IceKnobs()
    d = IceKnobs()
    for k in raw:
        if k not in ("anchor", "derived_ai", "eta", "sample_n", "sample_gap", "starts"):
            err(
                f"ice.{k}",
                "unknown key (expected one of anchor, derived_ai, eta, sample_n, sample_gap, "
                "starts)",
            )
    flags = {}
    for k in ("anchor", "derived_ai", "starts"):
        v = raw.get(k, getattr(d, k))
        if not isinstance(v, bool):
            err(f"ice.{k}", f"expected true or false, got {v!r}")
            v = getattr(d, k)
        flags[k] = v
    eta = _number(raw.get("eta", d.eta), "ice.eta", err, 0.0, 1.0, d.eta)
    n = raw.get("sample_n", d.sample_n)
    if isinstance(n, float) and n.is_integer():
        n = int(n)
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 1024 or n & (n - 1):
        err("ice.sample_n", f"expected a power of two 1..1024, got {n!r}")
        n = d.sample_n
    gap = raw.get("sample_gap", d.sample_gap)
    if isinstance(gap, bool) or not isinstance(gap, (int, float)) or not 0 <= gap <= 100:
        err("ice.sample_gap", f"expected a number of base RTTs in [0, 100], got {gap!r}")
        gap = d.sample_gap
    return IceKnobs(
        anchor=flags["anchor"],
        derived_ai=flags["derived_ai"],
        eta=eta,
        sample_n=n,
        sample_gap=float(gap),
        starts=flags["starts"],
    )


def _background(raw: Any, topo: TopologySpec | None, err: Any) -> tuple[Background, ...]:
    if not isinstance(raw, list) or len(raw) > MAX_BACKGROUND:
        err("background", f"expected a list of at most {MAX_BACKGROUND} {{src, dst, bytes}}")
        return ()
    hosts = {h.name for h in topo.hosts} if topo is not None else set()
    out = []
    for i, b in enumerate(raw):
        key = f"background[{i}]"
        if not isinstance(b, Mapping) or set(b) != {"src", "dst", "bytes"}:
            err(key, "expected a mapping with exactly src, dst, bytes")
            continue
        src, dst = b["src"], b["dst"]
        bad = [h for h in (src, dst) if not isinstance(h, str) or (hosts and h not in hosts)]
        if bad or src == dst:
            err(key, f"expected two different hosts of the topology, got {src!r} -> {dst!r}")
            continue
        try:
            size = parse_size(b["bytes"])
        except (ValueError, TypeError) as e:
            err(f"{key}.bytes", str(e))
            continue
        if not 1 <= size <= 1 << 30:
            err(f"{key}.bytes", f"expected 1 B .. 1 GiB, got {size}")
            continue
        out.append(Background(src=src, dst=dst, bytes=size))
    return tuple(out)


def _link_down(raw: Any, topo: TopologySpec | None, err: Any) -> LinkDown | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or not {"a", "b", "at_us"} <= set(raw) <= {
        "a",
        "b",
        "at_us",
        "drain_us",
    }:
        err("link_down", "expected {a: SWITCH, b: SWITCH, at_us: US, drain_us: US}")
        return None
    a, b = raw["a"], raw["b"]
    if topo is not None and not any({ln.a.node, ln.b.node} == {a, b} for ln in topo.links):
        err("link_down", f"no link between {a!r} and {b!r} in topology {topo.name!r}")
        return None
    at = _number(raw["at_us"], "link_down.at_us", err, 0.0, 1e9, 0.0)
    drain = raw.get("drain_us", 0.0)
    if isinstance(drain, bool) or not isinstance(drain, (int, float)) or not 0 <= drain <= 1e9:
        err("link_down.drain_us", f"expected a number of microseconds 0..1e9, got {drain!r}")
        drain = 0.0
    return LinkDown(a=str(a), b=str(b), at_us=at, drain_us=float(drain))
