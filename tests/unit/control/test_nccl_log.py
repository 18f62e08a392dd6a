"""NCCL_DEBUG=INFO parsing: ranks, hosts, devices, rings and trees; garbage lines become warnings."""

from __future__ import annotations

from pathlib import Path

import pytest

from icefabric.control.ccl.demand import demand_from_job
from icefabric.control.ccl.job import parse_job
from icefabric.control.ccl.nccl_log import load_nccl_log, parse_nccl_log, to_job

FIX = Path(__file__).parent / "fixtures"


def test_multi_node_two_channels() -> None:
    log = load_nccl_log(FIX / "nccl_2node_8rank_2ch.log")
    assert log.nranks == 8 and log.n_channels == 2
    assert log.hosts() == {r: ("gpu-node-a" if r < 4 else "gpu-node-b") for r in range(8)}
    r5 = log.ranks[5]
    assert (r5.pid, r5.cuda_dev, r5.bus_id, r5.nvml_dev) == (42002, 1, "1c000", 1)
    assert r5.comm_id == "0x7a1c5e3d9b20f411" and r5.library == "NCCL"
    assert log.rings == {0: (0, 1, 2, 3, 4, 5, 6, 7), 1: (0, 3, 2, 1, 4, 7, 6, 5)}
    assert log.trees[0] == {0: -1, 1: 0, 2: 1, 3: 2, 4: 0, 5: 4, 6: 5, 7: 6}
    assert log.trees[1][4] == -1 and log.trees[1][0] == 4


def test_garbage_lines_are_warnings_with_line_numbers_and_good_lines_survive() -> None:
    log = load_nccl_log(FIX / "nccl_2node_8rank_2ch.log")
    text = (FIX / "nccl_2node_8rank_2ch.log").read_text().splitlines()
    got = {w.line: w.reason for w in log.warnings}
    assert set(got) == {30, 49, 50, 51, 52}
    assert "ring of 3 ranks" in got[30] and text[29].endswith("0   3   2")
    assert "expected integers" in got[49]
    assert "rank 9 outside 0..7" in got[50]
    assert "malformed CCL line prefix" in got[51]
    assert "no rank list" in got[52]
    # the rank-9 garbage line did not displace rank 1's real init line
    assert log.ranks[1].host == "gpu-node-a" and log.ranks[1].pid == 31002
    assert log.lines_used > 50 and log.lines_read == len(text)


def test_nccl_2_4_ring_lines_and_old_tree_form() -> None:
    log = load_nccl_log(FIX / "nccl_2_4_4node_rings.log")
    assert log.rings == {0: (0, 2, 1, 3), 1: (0, 1, 3, 2)}
    assert log.trees[0] == {0: -1, 1: 0, 2: 0, 3: 1}
    assert log.hosts()[3] == "ip-172-31-0-14"
    assert not log.warnings


def test_ring_rebuilt_from_connection_lines_ignoring_tree_connections() -> None:
    log = load_nccl_log(FIX / "nccl_edges_only_4node.log")
    assert log.rings == {0: (0, 1, 3, 2)}
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
    assert log.rings == {0: (0, 2, 1)} and log.hosts() == {0: "n1", 1: "n2", 2: "n3"}
    assert log.ranks[0].library == "BCCL" and not log.warnings
    job = to_job(log, name="j", collective="allreduce", message_bytes=300)
    assert job.ranks[0].vendor == "baidu"


def test_conflicting_lines_keep_the_first() -> None:
    lines = [
        "a:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1 - Init START",
        "b:1:1 [0] NCCL INFO comm 0x2 rank 1 nranks 2 cudaDev 0 busId 1 - Init START",
        "c:1:1 [0] NCCL INFO comm 0x3 rank 1 nranks 2 cudaDev 0 busId 1 - Init START",
        "a:1:1 [0] NCCL INFO comm 0x9 rank 0 nranks 4 cudaDev 0 busId 1 - Init START",
        "a:1:1 [0] NCCL INFO Trees [0] 1/-1/-1->0->-1",
        "b:1:1 [0] NCCL INFO Trees [0] -1/-1/-1->1->0",
        "c:1:1 [0] NCCL INFO Trees [0] -1/-1/-1->0->1",
        "a:1:1 [0] NCCL INFO Trees [0] 7",
    ]
    log = parse_nccl_log(lines, source="x.log")
    assert log.hosts() == {0: "a", 1: "b"}
    assert log.trees[0] == {0: -1, 1: 0}
    assert [w.line for w in log.warnings] == [3, 4, 7, 8]
    assert str(log.warnings[0]).startswith("line 3: rank 1 already on b pid 1")


def test_comm_id_filter() -> None:
    lines = [
        "a:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1 commId 0xaaa - Init START",
        "b:1:1 [0] NCCL INFO comm 0x2 rank 1 nranks 2 cudaDev 0 busId 1 commId 0xaaa - Init START",
        "a:1:1 [0] NCCL INFO comm 0x3 rank 0 nranks 4 cudaDev 0 busId 1 commId 0xbbb - Init START",
        "a:1:1 [0] NCCL INFO comm 0x3 rank 0 nRanks 4 nNodes 2 localRanks 2 localRank 0 MNNVL 0",
    ]
    log = parse_nccl_log(lines, comm_id="0xAAA")
    assert log.nranks == 2 and not log.warnings
    unfiltered = parse_nccl_log(lines)
    assert [w.line for w in unfiltered.warnings] == [3, 4]


def test_log_and_equivalent_job_give_the_same_demand() -> None:
    log = load_nccl_log(FIX / "nccl_2node_8rank_2ch.log")
    hm = {"gpu-node-a": "h1", "gpu-node-b": "h2"}
    from_log = to_job(
        log, name="train", collective="all-reduce", message_bytes=1 << 28, host_map=hm
    )
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
    # two node-crossing hops per channel ring: 3->4 and 7->0 on channel 0, 1->4 and 5->0 on channel 1
    assert sorted((f.channel, f.src_rank, f.dst_rank) for f in d1) == [
        (0, 3, 4),
        (0, 7, 0),
        (1, 1, 4),
        (1, 5, 0),
    ]
    assert all(f.bytes == pytest.approx(2 * 7 / 8 * (1 << 28) / 2) for f in d1)
    tree_job = to_job(
        log, name="t", collective="all-reduce", message_bytes=1 << 20, algorithm="tree", host_map=hm
    )
    td = demand_from_job(tree_job)
    # channel 0: edge 4->0 crosses nodes (both directions); channel 1: edge 0->4
    assert sorted((f.channel, f.src_rank, f.dst_rank) for f in td) == [
        (0, 0, 4),
        (0, 4, 0),
        (1, 0, 4),
        (1, 4, 0),
    ]


def test_to_job_needs_hosts_of_every_rank() -> None:
    log = parse_nccl_log(["a:1:1 [0] NCCL INFO Channel 00/01 :    0   1"])
    assert [w.reason for w in log.warnings] == ["no init line names rank -> host"]
    with pytest.raises(ValueError, match="does not name the host of every rank"):
        to_job(log, name="j", collective="all-reduce", message_bytes=1)
