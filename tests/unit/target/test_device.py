"""Device: BMv2 simple_switch semantics with a fake pipeline (no compiler needed)."""

from __future__ import annotations

import threading
import time

import pytest
from test_device_fake import FakePipeline

from icefabric.target.device import CloneSession, Device, Replica
from icefabric.target.runtime import ManualClock
from icefabric.waiting import poll_until


@pytest.fixture
def dev() -> Device:
    d = Device(cpu_port=64, clock=ManualClock(1000))
    d.set_pipeline(FakePipeline())
    return d


def run(d: Device, *packets: tuple[int, bytes]) -> list[tuple[int, bytes]]:
    for port, data in packets:
        d.inject(port, data)
    d.run_until_idle()
    return d.collect()


def test_unicast_and_port_zero_default(dev: Device) -> None:
    out = run(dev, (1, bytes([0, 3, 0, 0xAA])), (2, bytes([0, 0, 0])))
    assert [p for p, _ in out] == [3, 0]
    assert out[0][1][:1] == b"\x00"  # instance type NORMAL
    assert out[0][1][6:] == bytes([0, 3, 0, 0xAA])


def test_drop_and_runt_are_counted(dev: Device) -> None:
    assert run(dev, (1, bytes([1, 0, 0])), (1, b"x")) == []
    assert dev.drop_counts() == {"ingress_drop": 2}


def test_pipeline_exception_does_not_crash(dev: Device) -> None:
    assert run(dev, (1, bytes([7, 1, 0])), (1, bytes([0, 2, 0]))) == [
        (2, bytes([0, 0, 0, 0, 0, 1, 0, 2, 0]))
    ]
    assert dev.drop_counts()["pipeline_error"] == 1


def test_oversized_dropped(dev: Device) -> None:
    dev.max_packet_bytes = 100
    assert run(dev, (1, bytes([0, 1, 0]) + bytes(200))) == []
    assert dev.drop_counts() == {"oversized": 1}


def test_no_pipeline_drops() -> None:
    d = Device()
    d.inject(1, b"abc")
    d.run_until_idle()
    assert d.drop_counts() == {"no_pipeline": 1}


def test_multicast_order_rid_and_instance_type(dev: Device) -> None:
    dev.set_multicast_group(5, [Replica(3, 1), Replica(1, 2), (2, 7)])
    out = run(dev, (1, bytes([2, 5, 0])))
    assert [(p, d[0], d[1]) for p, d in out] == [(3, 5, 1), (1, 5, 2), (2, 5, 7)]
    assert run(dev, (1, bytes([2, 9, 0]))) == []
    assert dev.drop_counts()["multicast_group_empty"] == 1


def test_resubmit_uses_original_packet_and_preserved_fields(dev: Device) -> None:
    pipe = dev.pipeline
    out = run(dev, (4, bytes([3, 2, 0])))
    assert [c[:2] for c in pipe.ingress_calls] == [(4, 0), (4, 6)]
    assert pipe.ingress_calls[1][2] == {"meta.m": 1}
    assert out == [(2, bytes([0, 0, 0, 0, 6, 2, 3, 2, 0]))]


def test_recirculate_feeds_egress_output_back(dev: Device) -> None:
    out = run(dev, (1, bytes([4, 2, 0])))
    pipe = dev.pipeline
    assert [c[1] for c in pipe.ingress_calls] == [0, 4]
    assert pipe.ingress_calls[1][2] == {"meta.m": 1}
    ((port, data),) = out
    assert port == 2
    assert data[4] == 4  # second pass saw instance_type RECIRC
    assert data[6:] == bytes([0, 2, 0])


def test_ingress_clone_to_session(dev: Device) -> None:
    dev.set_clone_session(7, CloneSession((Replica(9, 3),), packet_length_bytes=8))
    out = run(dev, (1, bytes([5, 2, 7, 0xEE, 0xEE])))
    by_port = dict(out)
    assert by_port[2][0] == 0
    clone = by_port[9]
    assert clone[:2] == bytes([1, 3])  # INGRESS_CLONE, rid from the session replica
    assert clone[5] == 1  # preserved field list value
    assert len(clone) == 8  # truncated by the session


def test_egress_clone(dev: Device) -> None:
    dev.set_clone_session(4, CloneSession((Replica(6, 0),)))
    out = run(dev, (1, bytes([8, 2, 4])))
    assert sorted(p for p, _ in out) == [2, 6]
    clone = dict(out)[6]
    assert clone[0] == 2  # EGRESS_CLONE


def test_missing_clone_session_counted(dev: Device) -> None:
    out = run(dev, (1, bytes([5, 2, 42])))
    assert [p for p, _ in out] == [2]
    assert dev.drop_counts()["clone_session_missing"] == 1


def test_digest_pushed_to_queue(dev: Device) -> None:
    run(dev, (1, bytes([6, 9, 0])))
    assert dev.pipeline.digests["learn"].pop() == [(9, 0x1234)]


def test_queue_rate_depths_and_timestamps(dev: Device) -> None:
    clock = dev.clock
    assert isinstance(clock, ManualClock)
    dev.set_queue_rate(2, pps=1000)  # one packet per millisecond
    out = run(dev, *[(1, bytes([0, 2, i])) for i in range(4)])
    assert len(out) == 1
    assert out[0][1][2:4] == bytes([0, 0])  # enq_qdepth 0, deq_qdepth 0
    assert dev.queue_depth(2) == 3
    clock.advance(999)
    dev.run_until_idle()
    assert dev.collect() == []
    clock.advance(1)
    dev.run_until_idle()
    ((_, d),) = dev.collect()
    assert (d[2], d[3]) == (0, 2)  # the first had already left; leaves 2 behind
    clock.advance(5000)
    dev.run_until_idle()
    rest = dev.collect()
    assert [(d[2], d[3]) for _, d in rest] == [(1, 1), (2, 0)]
    assert dev.next_departure_us() is None


def test_queue_rate_in_bits_per_second(dev: Device) -> None:
    dev.set_queue_rate(3, bps=8000)  # 1000 bytes/s: a 10-byte packet takes 10 ms
    run(dev, (1, bytes([0, 3, 0]) + bytes(7)), (1, bytes([0, 3, 1]) + bytes(7)))
    # what egress puts on the wire counts: the fake egress adds a 6-byte header -> 16 ms
    assert dev.next_departure_us() == 1000 + 16_000


def test_recirculation_takes_no_transmission_time(dev: Device) -> None:
    dev.set_queue_rate(3, bps=8000)  # a 16-byte frame takes 16 ms on the wire
    out = run(dev, (1, bytes([4, 3, 0]) + bytes(7)))  # recirculated once, then out of port 3
    assert [p for p, _ in out] == [3]  # the recirculated pass did not hold the port


def test_queue_capacity_tail_drop(dev: Device) -> None:
    dev.set_queue_rate(None, pps=1)
    dev.set_queue_depth(2, 2)
    out = run(dev, *[(1, bytes([0, 2, i])) for i in range(5)])
    assert len(out) == 1  # first left at once, two queued, two dropped
    assert dev.drop_counts() == {"queue_full": 2}
    with pytest.raises(ValueError):
        dev.set_queue_depth(2, 0)


def test_cpu_port_packet_out_and_packet_in(dev: Device) -> None:
    got: list[bytes] = []
    dev.packet_in_handlers.append(got.append)
    dev.packet_out(bytes([0, 64, 0]))
    dev.run_until_idle()
    assert dev.pipeline.ingress_calls[0][0] == 64
    assert len(got) == 1 and got[0][6:] == bytes([0, 64, 0])
    with pytest.raises(ValueError):
        Device().packet_out(b"x")


def test_attached_ports_and_unknown_port(dev: Device) -> None:
    sent: list[bytes] = []
    dev.attach_port(1, sent.append)
    run(dev, (2, bytes([0, 1, 0])), (2, bytes([0, 5, 0])))
    assert len(sent) == 1
    assert dev.drop_counts() == {"unknown_port": 1}


def test_collect_by_port(dev: Device) -> None:
    for data in (bytes([0, 2, 0]), bytes([0, 3, 0]), bytes([0, 2, 1])):
        dev.inject(1, data)
    dev.run_until_idle()
    assert [p for p, _ in dev.collect(2)] == [2, 2]
    assert [p for p, _ in dev.collect()] == [3]


def test_loop_limit_stops_endless_recirculation() -> None:
    class Looping(FakePipeline):
        def egress(self, ctx, **kw):  # type: ignore[no-untyped-def]
            res = super().egress(ctx, **kw)
            res.recirculate = 1
            return res

    d = Device(clock=ManualClock())
    d.set_pipeline(Looping())
    d.inject(1, bytes([0, 1, 0]))
    d.run_until_idle()
    assert d.drop_counts() == {"loop_limit": 1}


def test_real_time_mode_delivers_from_threads() -> None:
    d = Device()
    d.set_pipeline(FakePipeline())
    got: list[bytes] = []
    done = threading.Event()

    def send(data: bytes) -> None:
        got.append(data)
        if len(got) == 20:
            done.set()

    d.attach_port(2, send)
    d.start()
    try:
        senders = [
            threading.Thread(target=lambda: [d.inject(1, bytes([0, 2, i])) for i in range(10)])
            for _ in range(2)
        ]
        for t in senders:
            t.start()
        for t in senders:
            t.join()
        assert done.wait(5), f"only {len(got)} packets arrived"
    finally:
        d.stop()
    assert poll_until(lambda: d._thread is None, 1, 0.01)


def test_real_time_rate_limit_paces_output() -> None:
    d = Device()
    d.set_pipeline(FakePipeline())
    d.set_queue_rate(2, pps=200)
    stamps: list[float] = []
    d.attach_port(2, lambda _: stamps.append(time.monotonic()))
    d.start()
    try:
        for i in range(5):
            d.inject(1, bytes([0, 2, i]))
        poll_until(lambda: len(stamps) >= 5, 5, 0.005)
    finally:
        d.stop()
    assert len(stamps) == 5
    assert stamps[-1] - stamps[0] >= 0.018  # 4 gaps of 5 ms
