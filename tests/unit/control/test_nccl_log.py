"""NCCL_DEBUG=INFO parsing: fixture logs, warnings with file and line, bounds, linear parsing."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from icefabric.control.ccl.demand import demand_from_job
from icefabric.control.ccl.job import parse_job
from icefabric.control.ccl.nccl_log import (
    MAX_RANKS,
    load_nccl_log,
    parse_nccl_log,
    single_host_note,
    to_job,
)

FIX = Path(__file__).parent / "fixtures"


def test_multi_node_two_channels() -> None:
    log = load_nccl_log(FIX / "nccl_2node_8rank_2ch.log")
    (c,) = log.comms
    assert c.nranks == 8 and c.n_channels == 2 and c.key == "0x7a1c5e3d9b20f411"
    assert c.hosts() == {r: ("gpu-node-a" if r < 4 else "gpu-node-b") for r in range(8)}
    r5 = c.ranks[5]
    assert (r5.pid, r5.cuda_dev, r5.bus_id, r5.nvml_dev) == (42002, 1, "1c000", 1)
    assert r5.comm_id == "0x7a1c5e3d9b20f411" and r5.library == "NCCL"
    assert c.rings == {0: (0, 1, 2, 3, 4, 5, 6, 7), 1: (0, 3, 2, 1, 4, 7, 6, 5)}
    assert c.ring_sources == {0: "order line", 1: "order line"}
    assert c.trees[0] == {0: -1, 1: 0, 2: 1, 3: 2, 4: 0, 5: 4, 6: 5, 7: 6}
    assert c.trees[1][4] == -1 and c.trees[1][0] == 4
    assert c.tree_format == "2.8+"


def test_garbage_lines_are_warnings_naming_file_and_line_and_good_lines_survive() -> None:
    path = FIX / "nccl_2node_8rank_2ch.log"
    log = load_nccl_log(path)
    text = path.read_text().splitlines()
    got = {w.line: w.reason for w in log.warnings}
    assert set(got) == {30, 49, 50, 51, 52}
    assert "ring of 3 ranks" in got[30] and text[29].endswith("0   3   2")
    assert "expected integers" in got[49]
    assert "rank 9 outside 0..7" in got[50]
    assert "malformed CCL line prefix" in got[51]
    assert "no rank list" in got[52]
    assert all(str(w).startswith(f"{path}:{w.line}: ") for w in log.warnings)
    assert all(w.line > 0 for w in log.warnings)
    # the rank-9 garbage line did not displace rank 1's real init line
    c = log.select()
    assert c.ranks[1].host == "gpu-node-a" and c.ranks[1].pid == 31002
    assert log.lines_used > 50 and log.lines_read == len(text)


def test_nccl_2_4_ring_lines_and_old_tree_form() -> None:
    log = load_nccl_log(FIX / "nccl_2_4_4node_rings.log")
    c = log.select()
    assert c.rings == {0: (0, 2, 1, 3), 1: (0, 1, 3, 2)}
    assert c.trees[0] == {0: -1, 1: 0, 2: 0, 3: 1} and c.tree_format == "2.4"
    assert c.hosts()[3] == "ip-172-31-0-14"
    assert not log.warnings


def test_ring_rebuilt_from_connection_lines_ignoring_tree_connections() -> None:
    log = load_nccl_log(FIX / "nccl_edges_only_4node.log")
    c = log.select()
    assert c.rings == {0: (0, 1, 3, 2)} and c.ring_sources == {0: "connection lines"}
    assert not log.warnings


def test_chain_form_other_vendor_and_mpirun_tags() -> None:
    lines = [
        "[1,0]<stdout>:n1:10:11 [0] BCCL INFO comm 0xa rank 0 nranks 3 cudaDev 0 busId 3000 - Init COMPLETE",
        "[1,1]<stdout>:n2:10:11 [0] BCCL INFO comm 0xb rank 1 nranks 3 cudaDev 0 busId 3000 - Init COMPLETE",
        "[1,2]<stdout>:n3:10:11 [0] BCCL INFO comm 0xc rank 2 nranks 3 cudaDev 0 busId 3000 - Init COMPLETE",
        "n1:10:11 [0] BCCL INFO Ring 00 : 0 -> 2 -> 1 -> 0",
        "hello world",
        "",
    ]
    log = parse_nccl_log(lines)
    c = log.select()
    assert c.rings == {0: (0, 2, 1)} and c.hosts() == {0: "n1", 1: "n2", 2: "n3"}
    assert c.ranks[0].library == "BCCL" and not log.warnings
    job = to_job(c, name="j", collective="allreduce", message_bytes=300)
    assert job.ranks[0].vendor == "baidu"


def test_conflicting_lines_keep_the_first() -> None:
    lines = [
        "a:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1 commId 0xa - Init START",
        "b:1:1 [0] NCCL INFO comm 0x2 rank 1 nranks 2 cudaDev 0 busId 1 commId 0xa - Init START",
        "c:1:1 [0] NCCL INFO comm 0x3 rank 1 nranks 2 cudaDev 0 busId 1 commId 0xa - Init START",
        "a:1:1 [0] NCCL INFO Trees [0] 1/-1/-1->0->-1",
        "b:1:1 [0] NCCL INFO Trees [0] -1/-1/-1->1->0",
        "b:1:1 [0] NCCL INFO Trees [0] -1/-1/-1->1->-1",
        "a:1:1 [0] NCCL INFO Trees [0] 7",
    ]
    log = parse_nccl_log(lines, source="x.log")
    c = log.select()
    assert c.hosts() == {0: "a", 1: "b"}
    assert c.trees[0] == {0: -1, 1: 0}
    assert [w.line for w in log.warnings] == [3, 6, 7]
    assert str(log.warnings[0]).startswith("x.log:3: communicator 0xa: rank 1 already on b pid 1")


def test_log_and_equivalent_job_give_the_same_demand() -> None:
    log = load_nccl_log(FIX / "nccl_2node_8rank_2ch.log")
    hm = {"gpu-node-a": "h1", "gpu-node-b": "h2"}
    c = log.select()
    from_log = to_job(c, name="train", collective="all-reduce", message_bytes=1 << 28, host_map=hm)
    from_file = parse_job(
        {
            "name": "train",
            "ranks": [{"host": "h1" if r < 4 else "h2"} for r in range(8)],
            "phases": [
                {
                    "name": "main",
                    "collective": "all-reduce",
                    "algorithm": "ring",
                    "channels": 2,
                    "message_bytes": "256MiB",
                    "rings": [[0, 1, 2, 3, 4, 5, 6, 7], [0, 3, 2, 1, 4, 7, 6, 5]],
                }
            ],
        }
    )
    d1, d2 = demand_from_job(from_log), demand_from_job(from_file)
    assert d1 == d2
    assert sorted((f.channel, f.src_rank, f.dst_rank) for f in d1) == [
        (0, 3, 4),
        (0, 7, 0),
        (1, 1, 4),
        (1, 5, 0),
    ]
    assert all(f.bytes == pytest.approx(2 * 7 / 8 * (1 << 28) / 2) for f in d1)
    tree_job = to_job(
        c, name="t", collective="all-reduce", message_bytes=1 << 20, algorithm="tree", host_map=hm
    )
    td = demand_from_job(tree_job)
    assert sorted((f.channel, f.src_rank, f.dst_rank) for f in td) == [
        (0, 0, 4),
        (0, 4, 0),
        (1, 0, 4),
        (1, 4, 0),
    ]


def test_to_job_needs_hosts_of_every_rank_and_lists_every_missing_rank() -> None:
    lines = [
        f"a:1:1 [0] NCCL INFO comm 0x1 rank {r} nranks 40 cudaDev 0 busId 1 commId 0xa - Init START"
        for r in (0, 2, 39)
    ]
    log = parse_nccl_log(lines, source="m.log")
    (w,) = log.warnings
    assert w.line == 1 and "no init line for 37 of 40 ranks: 1, 3-38" in w.reason
    with pytest.raises(ValueError, match=r"host of 37 of 40 ranks \(1, 3-38\)"):
        to_job(log.select(), name="j", collective="all-reduce", message_bytes=1)


def test_a_log_without_init_lines_has_no_communicator() -> None:
    log = parse_nccl_log(["a:1:1 [0] NCCL INFO Channel 00/01 :    0   1"], source="n.log")
    assert log.comms == [] and any("name no communicator" in n for n in log.notes)
    with pytest.raises(LookupError, match="no communicator"):
        log.select()


def test_collectives_without_rings_give_a_valid_job_and_bad_names_are_refused() -> None:
    c = load_nccl_log(FIX / "nccl_2node_8rank_2ch.log").select()
    a2a = to_job(c, name="a", collective="alltoall", message_bytes=1 << 20)
    (ph,) = a2a.phases
    assert ph.collective == "all-to-all" and ph.algorithm == "" and not ph.rings
    sr = to_job(c, name="s", collective="send-recv", message_bytes=1 << 20)
    assert sr.phases[0].pairs == tuple((i, i + 1) for i in range(7))
    with pytest.raises(ValueError, match="--collective: expected one of"):
        to_job(c, name="x", collective="all-reduse", message_bytes=1)
    with pytest.raises(ValueError, match="--algorithm: all-to-all takes no algorithm"):
        to_job(c, name="x", collective="all-to-all", algorithm="ring", message_bytes=1)
    with pytest.raises(ValueError, match="--algorithm: all-gather runs as"):
        to_job(c, name="x", collective="all-gather", algorithm="tree", message_bytes=1)


def test_single_host_note() -> None:
    lines = [
        f"box:{10 + r}:{10 + r} [{r}] NCCL INFO comm 0x{r} rank {r} nranks 2 cudaDev {r} busId 1 "
        "commId 0xb - Init START"
        for r in range(2)
    ] + ["box:10:10 [0] NCCL INFO Channel 00/01 :    0   1"]
    job = to_job(
        parse_nccl_log(lines).select(), name="one", collective="all-reduce", message_bytes=1
    )
    assert "all 2 ranks of job 'one' run on host box" in single_host_note(job)
    assert demand_from_job(job).flows == ()


def test_huge_nranks_is_refused_without_allocating() -> None:
    tracemalloc.start()
    try:
        log = parse_nccl_log(
            ["h:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 999999999 cudaDev 0 - Init COMPLETE"]
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 5 << 20
    assert log.comms == [] and f"nranks 999999999 outside 1..{MAX_RANKS}" in log.warnings[0].reason


@pytest.mark.timeout(60)
def test_long_hostile_lines_parse_in_linear_time() -> None:
    # 1 MB lines that made the old prefix regex backtrack quadratically (hours at this size)
    hostile = [
        "a" * (1 << 20),
        "a:1:" * (1 << 18),
        ("x:1:1 [0] NCCL INFO " * 40000)[: 1 << 20],
        "[0] NCCL INFO " * 70000,
        "Channel 00/02 : " + "1 " * 400000,
    ]
    log = parse_nccl_log(hostile, source="big.log")
    assert log.lines_read == 5 and log.comms == []


def test_over_long_line_is_cut_with_a_warning(tmp_path: Path) -> None:
    p = tmp_path / "long.log"
    good = "h:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 1 cudaDev 0 commId 0x9 - Init COMPLETE\n"
    p.write_text("z" * (3 << 20) + "\n" + good)
    log = load_nccl_log(p)
    assert log.lines_read == 2 and log.warnings[0].line == 1
    assert "only its start is read" in log.warnings[0].reason
    assert log.select().nranks == 1


def test_too_many_warnings_are_counted_not_dropped_silently() -> None:
    bad = ["h:1:1 [0] NCCL INFO Trees [0] x"] * 1500
    log = parse_nccl_log(bad)
    assert len(log.warnings) == 1000 and log.warnings_dropped == 500


def test_to_job_of_a_whole_log_uses_its_largest_communicator() -> None:
    log = load_nccl_log(FIX / "nccl_2node_8rank_2ch.log")
    job = to_job(log, name="w", collective="all-reduce", message_bytes=1)
    assert len(job.ranks) == 8 and len(job.phases[0].rings) == 2
    with pytest.raises(ValueError, match="no communicator"):
        to_job(parse_nccl_log(["x"]), name="w", collective="all-reduce", message_bytes=1)


def test_bench_log_reads_back_its_rings(capsys: pytest.CaptureFixture[str]) -> None:
    from icefabric.control.ccl.nccl.bench import main

    assert main(["--ranks", "64", "--channels", "2"]) == 0
    assert "rings rebuilt from connection lines: all match" in capsys.readouterr().out


def test_warnings_escape_control_characters() -> None:
    log = parse_nccl_log(["h:1:1 [0] NCCL INFO Trees [0] \x1b[31mred\x07"], source="esc.log")
    (w,) = log.warnings
    assert "\x1b" not in str(w) and "\\x1b[31mred\\x07" in str(w)


def test_warn_and_trace_lines_also_split_interleaved_output() -> None:
    lines = [
        "a:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 commId 0xd - Init START",
        "b:2:2 [1] NCCL INFO comm 0x2 rank 1 nranks 2 cudaDev 1 commId 0xd - Init START",
        "a:1:1 [0] NCCL INFO Channel 00/01 :    0   1",
        "a:1:1 [0] NCCL INFO Trees [0] 1/-1/-1->0->-1 [1] 1/-1/-1->0->-1 "
        "b:2:2 [1] transport/net.cc:123 NCCL WARN NET/IB : oops",
        "b:2:2 [1] NCCL INFO Trees [0] -1/-1/-1->1->0 [1] -1/-1/-1->1->0",
        "[2025-01-02 03:04:05] b:2:2 [1] init.cc:9 NCCL WARN Cuda failure 'out of memory'",
        "a:1:1 [0] 12.345678 enqueue.cc:77 NCCL TRACE opCount 0",
    ]
    log = parse_nccl_log(lines)
    c = log.select()
    assert c.rings == {0: (0, 1)} and c.hosts() == {0: "a", 1: "b"} and not log.warnings
    assert c.trees == {0: {0: -1, 1: 0}, 1: {1: 0}}  # a's last entry was cut: not read
