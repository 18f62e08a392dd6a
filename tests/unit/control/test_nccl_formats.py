"""Every NCCL log format from 2.3 to 2.29, written from rings and trees we choose, read back.

The logs come from ``_nccl_loggen`` (NCCL's own format strings per release); each test compares
what the importer recovers with the rings and trees the log was written from.
"""

from __future__ import annotations

import re

import pytest
from _nccl_loggen import Comm, layout, nccl_rings, nccl_trees, order_line, write_log

from icefabric.control.ccl.nccl.formats import BadLine, parse_order, parse_trees
from icefabric.control.ccl.nccl_log import CommLog, NcclLog, parse_nccl_log, to_job

VERSIONS = ["2.3", "2.4", "2.5", "2.6", "2.7", "2.8", "2.12", "2.18", "2.19", "2.23", "2.29"]
STYLES = ["plain", "pdsh", "mpirun", "timestamp"]
TREE_FORMAT = {"2.4": "2.4", "2.5": "2.5-2.7", "2.6": "2.5-2.7", "2.7": "2.5-2.7"}


def _ver(v: str) -> tuple[int, int]:
    a, b = v.split(".")
    return int(a), int(b)


def _check(
    log: NcclLog, comm: CommLog, rings: list[list[int]], trees: list[dict[int, int]]
) -> None:
    assert comm.rings == {c: tuple(r) for c, r in enumerate(rings)}
    assert comm.complete_trees() == dict(enumerate(trees))
    assert len(comm.ranks) == comm.nranks
    assert not log.warnings, [str(w) for w in log.warnings]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("style", STYLES)
def test_each_version_and_launcher_prefix(version: str, style: str) -> None:
    n, per_host = 16, 4
    procs = layout(n // per_host, per_host)
    rings = nccl_rings(n, per_host, 2, seed=7)
    trees = [] if version == "2.3" else nccl_trees(n, per_host, 2)
    lines = write_log(version, [Comm(procs, rings, trees)], style=style, seed=11)
    log = parse_nccl_log(lines, source="gen.log")
    (comm,) = log.comms
    _check(log, comm, rings, trees)
    assert comm.ring_sources == {0: "order line", 1: "order line"}
    assert comm.version == f"NCCL {version}.3+cuda12.2"
    assert comm.hosts() == {r: procs[r][0] for r in range(n)}
    assert [comm.ranks[r].pid for r in range(n)] == [p[1] for p in procs]
    if trees:
        assert comm.tree_format == TREE_FORMAT.get(version, "2.8+")


@pytest.mark.parametrize("version", ["2.3", "2.4", "2.7", "2.12", "2.19", "2.23", "2.29"])
def test_more_than_twenty_ranks_rings_come_from_connection_lines(version: str) -> None:
    n, per_host = 64, 8
    procs = layout(n // per_host, per_host)
    rings = nccl_rings(n, per_host, 4, seed=3)
    trees = [] if version == "2.3" else nccl_trees(n, per_host, 4)
    lines = write_log(version, [Comm(procs, rings, trees)], style="pdsh", seed=5)
    printed = [ln for ln in lines if re.search(r"INFO (Channel|Ring) 0\d(/04)? :  ", ln)]
    assert len(printed) == 4  # rank 0's order lines, each cut by NCCL itself
    if _ver(version) >= (2, 23):
        assert all(ln.endswith("...") for ln in printed)
    else:
        assert all(len(ln.split("INFO ")[1].split(":")[-1].split()) == 20 for ln in printed)
    log = parse_nccl_log(lines, source="big.log")
    (comm,) = log.comms
    _check(log, comm, rings, trees)
    assert set(comm.ring_sources.values()) == {"order line + connection lines"}


def test_cut_order_line_without_connection_lines_is_a_clear_warning() -> None:
    n = 32
    procs = layout(4, 8)
    rings = nccl_rings(n, 8, 1, seed=1)
    lines = write_log("2.19", [Comm(procs, rings)], seed=2)
    lines = [ln for ln in lines if " via " not in ln]
    log = parse_nccl_log(lines, source="cut.log")
    assert log.select().rings == {}
    (w,) = log.warnings
    assert w.source == "cut.log" and w.line > 0
    assert "ring order cut at 20 of 32 ranks" in w.reason and "cannot be rebuilt" in w.reason


@pytest.mark.parametrize("version", ["2.4", "2.7", "2.19", "2.29"])
@pytest.mark.parametrize("style", ["plain", "mpirun", "pdsh"])
def test_interleaved_lines_are_split_at_every_prefix(version: str, style: str) -> None:
    n, per_host = 32, 8
    procs = layout(n // per_host, per_host)
    rings = nccl_rings(n, per_host, 2, seed=5)
    trees = nccl_trees(n, per_host, 2)
    lines = write_log(version, [Comm(procs, rings, trees)], style=style, seed=9, cuts=40)
    assert sum(ln.count(" NCCL INFO ") > 1 for ln in lines) >= 30
    log = parse_nccl_log(lines, source="mixed.log")
    (comm,) = log.comms
    _check(log, comm, rings, trees)
    assert comm.hosts() == {r: procs[r][0] for r in range(n)}


def test_an_interleaved_line_never_binds_a_field_to_the_wrong_process() -> None:
    lines = [
        "a:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1a000 commId 0xc - Init "
        "STARb:2:2 [1] NCCL INFO comm 0x2 rank 1 nranks 2 cudaDev 1 busId 1b000 commId 0xc - Init START",
        "a:1:1 [0] NCCL INFO Channel 00/01 :    0b:2:2 [1] NCCL INFO Trees [0] -1/-1/-1->1->0",
        "a:1:1 [0] NCCL INFO Trees [0] 1/-1/-1->0->-1",
        "b:2:2 [1] NCCL INFO Setting affinity for GPU 1 to ffff",
    ]
    log = parse_nccl_log(lines, source="i.log")
    c = log.select()
    assert c.ranks[0].host == "a" and c.ranks[0].bus_id == "1a000"
    assert c.ranks[1].host == "b" and c.ranks[1].cuda_dev == 1
    assert c.trees == {0: {0: -1, 1: 0}}
    assert c.rings == {}  # rank 0's order line was cut after "0": not a 1-rank ring
    assert [w.line for w in log.warnings] == []


@pytest.mark.parametrize("version", ["2.12", "2.19", "2.29"])
def test_graph_subsystem_lines_are_read_as_what_they_are(version: str) -> None:
    n, per_host = 24, 4
    procs = layout(n // per_host, per_host)
    rings = nccl_rings(n, per_host, 2, seed=2)
    trees = nccl_trees(n, per_host, 2)
    comm = Comm(procs, rings, trees, graph_lines=True)
    lines = write_log(version, [comm], seed=3)
    assert any(re.search(r"INFO Ring 00 : \d+ -> \d+ -> \d+$", ln) for ln in lines)
    log = parse_nccl_log(lines)
    _check(log, log.select(), rings, trees)
    # without order and connection lines, the GRAPH triples alone give the rings
    comm.order_lines = False
    lines = [ln for ln in write_log(version, [comm], seed=3) if " via " not in ln]
    log = parse_nccl_log(lines)
    c = log.select()
    _check(log, c, rings, trees)
    assert set(c.ring_sources.values()) == {"GRAPH ring lines"}


@pytest.mark.parametrize("version", ["2.4", "2.5", "2.7"])
def test_old_connection_lines_without_markers_give_no_false_warnings(version: str) -> None:
    n, per_host = 32, 4
    procs = layout(n // per_host, per_host)
    rings = nccl_rings(n, per_host, 2, seed=4)
    trees = nccl_trees(n, per_host, 2)
    lines = write_log(version, [Comm(procs, rings, trees)], seed=1)
    assert not any("Connected all" in ln for ln in lines)
    # tree connections are printed too, interleaved per channel with the ring's
    tree_edges = {(c, r, p) for c, t in enumerate(trees) for r, p in t.items() if p >= 0}
    printed = {
        (int(m.group(1)), int(m.group(2)), int(m.group(3)))
        for m in (re.search(r"(?:Channel|Ring) (\d+) : (\d+)\S* -> (\d+)", ln) for ln in lines)
        if m
    }
    assert tree_edges & printed
    log = parse_nccl_log(lines)
    _check(log, log.select(), rings, trees)


@pytest.mark.parametrize("version", ["2.4", "2.7", "2.12", "2.19", "2.29"])
def test_several_communicators_are_grouped_and_importable_as_phases(version: str) -> None:
    world = layout(2, 4)
    rings = nccl_rings(8, 4, 2, seed=1)
    trees = nccl_trees(8, 4, 2)
    even = [world[i] for i in (0, 2, 4, 6)]
    odd = [world[i] for i in (1, 3, 5, 7)]
    comms = [
        Comm(world, rings, trees, comm_id=0xAAA),
        Comm(even, [[0, 1, 2, 3], [0, 2, 1, 3]], [{0: -1, 1: 0, 2: 0, 3: 2}], 0xBBB, 0x7000),
        Comm(odd, [[0, 3, 2, 1]], [], comm_id=0xCCC, ptr_base=0x8000),
    ]
    lines = write_log(version, comms, seed=4)
    log = parse_nccl_log(lines, source="multi.log")
    assert not log.warnings
    assert sorted(c.nranks for c in log.comms) == [4, 4, 8]
    by_rings = {tuple(c.rings.values()): c for c in log.comms}
    world_c = by_rings[tuple(tuple(r) for r in rings)]
    even_c = by_rings[((0, 1, 2, 3), (0, 2, 1, 3))]
    odd_c = by_rings[((0, 3, 2, 1),)]
    assert even_c.hosts() == {0: "node00", 1: "node00", 2: "node01", 3: "node01"}
    assert [even_c.ranks[r].pid for r in range(4)] == [p[1] for p in even]
    assert [odd_c.ranks[r].pid for r in range(4)] == [p[1] for p in odd]
    if _ver(version) >= (2, 18):
        assert {c.key for c in log.comms} == {"0xaaa", "0xbbb", "0xccc"}
        assert log.select("0xbb") is even_c
    assert log.select() is world_c  # the largest by default
    assert log.select(f"#{log.comms.index(odd_c)}") is odd_c
    with pytest.raises(LookupError, match=r"no communicator matches 'zz'.*#0"):
        log.select("zz")
    job = to_job(log.comms, name="all", collective="all-reduce", message_bytes=1 << 20)
    assert [p.name for p in job.phases] == ["comm0", "comm1", "comm2"]
    assert len(job.ranks) == 8  # processes, not communicator ranks
    odd_phase = job.phases[log.comms.index(odd_c)]
    assert odd_phase.rings[0] == tuple(odd_phase.ranks[i] for i in (0, 3, 2, 1))
    assert {job.ranks[g].host for g in odd_phase.ranks} == {"node00", "node01"}


def test_two_runs_in_one_file_are_two_communicators() -> None:
    rings = nccl_rings(8, 4, 1, seed=1)
    run1 = write_log("2.7", [Comm(layout(2, 4, pid0=1000), rings)], seed=1)
    run2 = write_log("2.7", [Comm(layout(2, 4, pid0=5000), [list(reversed(rings[0]))])], seed=2)
    log = parse_nccl_log(run1 + run2)
    assert len(log.comms) == 2 and not log.warnings
    assert log.comms[0].ranks[0].pid == 1000 and log.comms[1].ranks[0].pid == 5000


def test_comm_split_children_are_grouped_by_parent_and_color() -> None:
    world = layout(2, 2)
    w = Comm(world, [[0, 1, 2, 3]], comm_id=0x1)
    a = Comm([world[0], world[2]], [[0, 1]], comm_id=0x2, ptr_base=0x9000)
    b = Comm([world[1], world[3]], [[0, 1]], comm_id=0x3, ptr_base=0xA000)
    lines = write_log("2.23", [w, a, b], seed=3)

    def as_split(line: str) -> str:  # ncclCommSplit prints parent and color, no commId
        m = re.search(r"commId 0x([23]) - Init", line)
        if not m:
            return line
        host, pid = re.search(r"(node\d+):(\d+):", line).groups()  # type: ignore[union-attr]
        wr = world.index(next(p for p in world if p[0] == host and p[1] == int(pid)))
        parent = f"0x{w.ptr_base + 0x1000 * wr:x}"
        line = line.replace("ncclCommInitRank", "ncclCommSplit")
        return line.replace(m.group(0), f"parent {parent} color {m.group(1)} key 0 - Init")

    log = parse_nccl_log([as_split(ln) for ln in lines])
    assert not log.warnings
    keys = sorted(c.key for c in log.comms)
    assert keys == ["0x1", "split:0x1:2:", "split:0x1:3:"]
    assert all(c.parent == "0x1" for c in log.comms if c.key.startswith("split"))
    assert {c.key: c.hosts()[1] for c in log.comms}["split:0x1:3:"] == "node01"


def test_rccl_extra_fields_and_lines_are_tolerated() -> None:
    n = 8
    procs = layout(2, 4)
    rings = nccl_rings(n, 4, 2, seed=6)
    trees = nccl_trees(n, 4, 2)
    lines = write_log("2.19", [Comm(procs, rings, trees)], seed=2)
    out = []
    for ln in lines:
        m = re.match(r"(node\d+):(\d+)", ln)
        if m and re.search(r"INFO (Channel \d+/\d : |Trees|Connected all rings)", ln):
            ln += f" comm 0x{int(m.group(2)):x}00 nRanks 08 busId 1a000"
        out.append(ln)
        if m and "Init START" in ln:
            out.append(
                ln.split(" NCCL INFO ")[0] + " NCCL INFO Ring 00 : 0 -> 1 failed to get "
                "link type and hop count"
            )
            out.append(
                ln.split(" NCCL INFO ")[0] + " NCCL INFO RCCL_MSCCL_ENABLE set by environment to 0."
            )
    log = parse_nccl_log(out)
    _check(log, log.select(), rings, trees)


def test_order_line_formats_of_each_dump_line() -> None:
    ring = list(range(30))
    old = order_line("2.19", 0, 2, ring)
    assert parse_order(old, cut=False).ranks == tuple(range(20))  # type: ignore[union-attr]
    new = order_line("2.23", 0, 2, list(range(60)))
    o = parse_order(new, cut=False)
    assert o is not None and o.partial and new.endswith("...")
    assert o.ranks == tuple(range(len(o.ranks))) and 30 < len(o.ranks) < 60
    short = parse_order(order_line("2.23", 1, 2, list(range(8))), cut=False)
    assert short is not None and not short.partial and short.ranks == tuple(range(8))
    with pytest.raises(BadLine, match=r"channel 3 out of range 0\.\.1"):
        parse_order("Channel 03/02 :    0   1", cut=False)


def test_trees_line_formats_and_cut_entries() -> None:
    t24 = parse_trees("Trees [0] -1->0->1/2/-1 [1] 3->0->-1/-1/-1", cut=False)
    assert t24 is not None and t24.era == "2.4"
    assert [(e.rank, e.parent, e.children) for e in t24.entries] == [(0, -1, (1, 2)), (0, 3, ())]
    t27 = parse_trees("Trees [0] 1/-1/-1->0->-1|-1->0->1/-1/-1", cut=False)
    assert t27 is not None and t27.era == "2.5-2.7" and t27.entries[0].children == (1,)
    odd = parse_trees("Trees [0] -1/-1/-1->1->0|2->1->-1/-1/-1", cut=False)
    assert odd is not None and odd.entries[0].parent == 0 and "differs" in odd.notes[0]
    cut = parse_trees("Trees [0] 1/-1/-1->0->-1 [1] 1/-1/-1->0->1", cut=True)
    assert cut is not None and [e.channel for e in cut.entries] == [0]  # "->1" may be "->12"
    with pytest.raises(BadLine, match="mixes the formats"):
        parse_trees("Trees [0] -1->0->1/2/-1 [1] 1/-1/-1->0->-1", cut=False)


def test_runtime_connect_rings_after_init_and_send_recv_connections_first() -> None:
    # NCCL >= 2.22 connects rings at the first collective, after Init COMPLETE; send/recv
    # connections (connIndex 1) may come before them and are not ring connections
    n = 8
    procs = layout(2, 4)
    rings = nccl_rings(n, 4, 2, seed=8)
    lines = write_log("2.29", [Comm(procs, rings)], seed=1, noise=False)
    per: dict[str, list[str]] = {}
    for ln in lines:
        per.setdefault(ln.split(" [")[0], []).append(ln)
    out: list[str] = []
    for key, ls in per.items():
        head = key + f" [{ls[0].split(' [')[1].split(']')[0]}] NCCL INFO "
        rank = next(int(m.group(1)) for ln in ls if (m := re.search(r" rank (\d+) nranks", ln)))
        ring_part = [ln for ln in ls if " via " in ln or "Connected all rings" in ln]
        rest = [ln for ln in ls if ln not in ring_part]
        p2p = f"{head}Channel 02/1 : {rank}[0] -> {(rank + 3) % n}[3] via P2P/CUMEM/read"
        out += [*rest, p2p, *ring_part]
    log = parse_nccl_log(out)
    _check(log, log.select(), rings, [])
    assert set(log.select().ring_sources.values()) == {"order line"}
    # the same without order lines: the rings come from the connection lines alone
    log = parse_nccl_log([ln for ln in out if not re.search(r"INFO Channel \d+/02 :", ln)])
    c = log.select()
    _check(log, c, rings, [])
    assert set(c.ring_sources.values()) == {"connection lines"}


@pytest.mark.parametrize("version", ["2.4", "2.5", "2.7", "2.12", "2.17"])
def test_tensor_and_data_parallel_groups_without_comm_id(version: str) -> None:
    world = layout(4, 4)
    tp = [[world[h * 4 + g] for g in range(4)] for h in range(4)]  # one group per host
    dp = [[world[h * 4 + g] for h in range(4)] for g in range(4)]  # one group per GPU index
    comms = [Comm(world, nccl_rings(16, 4, 2, seed=2), nccl_trees(16, 4, 2), ptr_base=0x100000)]
    comms += [
        Comm(m, [[0, 1, 2, 3], [0, 2, 1, 3]], [], ptr_base=0x200000 + i * 0x10000)
        for i, m in enumerate(tp)
    ]
    comms += [
        Comm(
            m,
            [[0, 1, 2, 3], [0, 3, 2, 1]],
            [{0: -1, 1: 0, 2: 0, 3: 1}],
            ptr_base=0x300000 + i * 0x10000,
        )
        for i, m in enumerate(dp)
    ]
    lines = write_log(version, comms, seed=6)
    assert "commId" not in "".join(lines)
    log = parse_nccl_log(lines, source="tpdp.log")
    assert not log.warnings
    got = sorted((c.nranks, tuple(c.ranks[r].pid for r in range(c.nranks))) for c in log.comms)
    want = sorted((len(c.procs), tuple(p[1] for p in c.procs)) for c in comms)
    if version == "2.4":
        # NCCL 2.4's NET lines name no device: the data-parallel groups (all over the network)
        # cannot be told apart, and a note says so; the tensor-parallel ones (P2P) can
        assert any("may be mixed" in n for n in log.notes)
        assert all((4, tuple(p[1] for p in m)) in got for m in tp)
        return
    assert got == want
    assert not any("may be mixed" in n for n in log.notes)
    for c in log.comms:
        spec = next(
            x for x in comms if [p[1] for p in x.procs] == [c.ranks[r].pid for r in range(c.nranks)]
        )
        assert c.rings == {i: tuple(r) for i, r in enumerate(spec.rings)}


@pytest.mark.parametrize("version", ["2.4", "2.7", "2.12", "2.19", "2.29"])
def test_one_process_driving_several_gpus(version: str) -> None:
    # ncclCommInitAll: one pid, one thread per device; lines are told apart by [dev]
    procs = [("como", 60725, g) for g in range(4)]
    rings = [[0, 1, 2, 3], [0, 3, 2, 1]]
    trees = [{0: -1, 1: 0, 2: 1, 3: 2}, {3: -1, 2: 3, 1: 2, 0: 1}]
    log = parse_nccl_log(write_log(version, [Comm(procs, rings, trees)], seed=3))
    (c,) = log.comms
    _check(log, c, rings, trees)
    assert {c.ranks[r].cuda_dev for r in range(4)} == {0, 1, 2, 3}
