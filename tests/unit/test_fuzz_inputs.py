"""Fuzzing the input boundaries (issue 11): topology and job files, NCCL log lines, API frames and
P4Runtime requests. Each may be rejected only with the boundary's own error type (one line naming
what was wrong), never with a traceback, a hang or unbounded memory.

Deterministic: hypothesis runs derandomized (a fixed seed per test), without an example database,
and with example counts sized so that the whole file runs in well under a minute.
"""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from icefabric.control.ccl.job import JobError, parse_job
from icefabric.control.ccl.nccl_log import parse_nccl_log
from icefabric.control.daemon.api import MAX_FRAME, ApiServer, FrameError, read_frame
from icefabric.files import parse_data_text
from icefabric.topo.spec import SpecError, parse_topology

ROOT = Path(__file__).resolve().parents[2]
TOPO: dict[str, Any] = yaml.safe_load(
    (ROOT / "topo" / "examples" / "leaf_spine_2x4.yaml").read_text()
)
JOB: dict[str, Any] = yaml.safe_load(
    (ROOT / "control" / "ccl" / "examples" / "mixed_dp_allreduce.yaml").read_text()
)

FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=150,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Values a hostile file may hold anywhere: wrong types, edge numbers, long and odd strings.
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 255, 256, 510, 511, 65535, 2**24, 2**32, 2**64, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.sampled_from(["", "a/b", "x" * 300, "\x1b[2J", "10.0.0.0/0", "ff:ff:ff:ff:ff:ff", "1e29"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, (*prefix, i))


def _mutated(doc: Any, data: st.DataObject, rounds: int = 3) -> Any:
    """``doc`` with a few values replaced, keys added or entries dropped at random places."""
    out = json.loads(json.dumps(doc))
    for _ in range(data.draw(st.integers(1, rounds))):
        paths = [p for p in _paths(out) if p]
        if not paths:
            return data.draw(values)
        path = data.draw(st.sampled_from(paths))
        parent = out
        for k in path[:-1]:
            parent = parent[k]
        how = data.draw(st.sampled_from(["replace", "drop", "add", "duplicate"]))
        last = path[-1]
        if how == "replace":
            parent[last] = data.draw(values)
        elif how == "drop":
            del parent[last]
        elif how == "add" and isinstance(parent, dict):
            parent[data.draw(st.text(max_size=10))] = data.draw(values)
        elif how == "duplicate" and isinstance(parent, list):
            parent.append(json.loads(json.dumps(parent[last])))
    return out


@FUZZ
@given(st.data())
def test_topology_documents(data: st.DataObject) -> None:
    doc = _mutated(TOPO, data)
    try:
        spec = parse_topology(doc, source="fuzz.yaml")
    except SpecError as exc:
        assert exc.errors and all(e.startswith("fuzz.yaml") for e in exc.errors)
        assert all(len(e) < 500 for e in exc.errors)
    else:
        assert spec.switches


@FUZZ
@given(st.data())
def test_job_documents(data: st.DataObject) -> None:
    doc = _mutated(JOB, data)
    try:
        job = parse_job(doc, source="fuzz.yaml")
    except JobError as exc:
        assert exc.errors and all(e.startswith("fuzz.yaml") for e in exc.errors)
        assert all(len(e) < 500 and e.isprintable() for e in exc.errors)
    else:
        assert job.ranks and job.phases


file_texts = st.one_of(
    st.text(max_size=300),
    st.binary(max_size=300).map(lambda b: b.decode("utf-8", "replace")),
    st.builds(
        lambda n, s: s * n,
        st.integers(1, 3000),
        st.sampled_from(["[", "{", "- ", "a: ", "&a [*a] ", "  ", '{"a":1,"a":2}']),
    ),
    st.sampled_from([yaml.safe_dump(TOPO), json.dumps(JOB)]).map(lambda t: t[: len(t) // 2]),
)


@FUZZ
@given(file_texts, st.booleans())
def test_file_texts(text: str, as_json: bool) -> None:
    try:
        parse_data_text(text, "fuzz.file", json_file=as_json)
    except SpecError as exc:
        assert str(exc).startswith("fuzz.file: ")
        assert len(str(exc)) < 600


nccl_words = st.sampled_from(
    [
        "NCCL INFO",
        "host1:123:456 [0]",
        "Channel 00/02 :",
        "nranks 999999999",
        "nranks " + "9" * 5000,
        "Ring 00 : 0 1 2 3",
        "Trees [0] 1/-1/-1->0->-1",
        "commId 0x1234",
        "cudaDev 0 busId 1000",
        "rank 0 nRanks 4",
        "[send] via NET/IB/0",
        "->",
        ":",
        "0",
    ]
)
nccl_lines = st.lists(
    st.builds(" ".join, st.lists(st.one_of(nccl_words, st.text(max_size=20)), max_size=10)),
    max_size=20,
)


@FUZZ
@given(nccl_lines)
def test_nccl_log_lines(lines: list[str]) -> None:
    parse_nccl_log(lines, source="fuzz.log")  # any line is data: never an exception


# ---------------------------------------------------------------- the API socket


def _frame_reply(raw: bytes) -> dict[str, Any] | None:
    a, b = socket.socketpair()
    try:
        a.sendall(raw)
        a.shutdown(socket.SHUT_WR)
        b.settimeout(5)
        return read_frame(b)
    finally:
        a.close()
        b.close()


frames = st.one_of(
    st.binary(max_size=64),
    st.builds(lambda body: struct.pack("!I", len(body)) + body, st.binary(max_size=200)),
    st.builds(
        lambda doc: (lambda body: struct.pack("!I", len(body)) + body)(
            json.dumps(doc, default=str).encode()
        ),
        values,
    ),
    st.builds(
        lambda n, c: (lambda body: struct.pack("!I", len(body)) + body)(c * n),
        st.integers(1, 50_000),
        st.sampled_from([b"[", b"{", b'"', b"\\"]),
    ),
    st.just(struct.pack("!I", MAX_FRAME + 1)),
)


@FUZZ
@given(frames)
def test_api_frames(raw: bytes) -> None:
    try:
        msg = _frame_reply(raw)
    except FrameError as exc:
        assert str(exc)
    else:
        assert msg is None or isinstance(msg, dict)


@pytest.fixture(scope="module")
def api_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    def echo(args: dict[str, Any]) -> Any:
        return {"n": len(args)}

    def boom(args: dict[str, Any]) -> Any:
        raise RuntimeError(f"handler failed on {sorted(args)[:3]}")

    server = ApiServer(tmp_path_factory.mktemp("api") / "s.sock", {"echo": echo, "boom": boom})
    server.start()
    yield server
    server.stop()


requests = st.fixed_dictionaries(
    {"op": st.one_of(st.sampled_from(["echo", "boom", "nope"]), values), "args": values}
)


@FUZZ
@given(requests)
def test_api_dispatch(api_server: ApiServer, request: dict[str, Any]) -> None:
    reply = api_server.dispatch(request)
    json.dumps(reply)
    assert reply["ok"] is True or reply["error"]["kind"] in ("usage", "runtime")


# ---------------------------------------------------------------- P4Runtime


@pytest.fixture(scope="module")
def p4rt(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[p4runtime_pb2_grpc.P4RuntimeStub, Any]]:
    import sys

    sys.path.insert(0, str(ROOT / "tests" / "unit" / "target"))
    from p4runtime_sh.p4runtime import P4RuntimeClient
    from test_server_fake import CPU_PORT, P4INFO_TEXT, loader

    from icefabric.target.device import Device
    from icefabric.target.server import serve

    device = Device(device_id=1, cpu_port=CPU_PORT)
    device.start()
    server, port, service = serve(device, "127.0.0.1:0", loader=loader)
    addr = f"127.0.0.1:{port}"
    tmp = tmp_path_factory.mktemp("p4rt")
    (tmp / "p4info.txt").write_text(P4INFO_TEXT)
    (tmp / "fake.bin").write_bytes(b"fake-program")
    client = P4RuntimeClient(1, addr, (0, 1))
    client.set_fwd_pipe_config(str(tmp / "p4info.txt"), str(tmp / "fake.bin"))
    ch = grpc.insecure_channel(addr)
    try:
        yield p4runtime_pb2_grpc.P4RuntimeStub(ch), client
    finally:
        ch.close()
        client.tear_down()
        server.stop(0)
        service.close()
        device.stop()


TABLE_IDS = [33554433, 33554434, 33554435, 33554436, 0, 1, 2**32 - 1]
ACTION_IDS = [16777217, 16777218, 16777219, 16777220, 0, 7]
byte_values = st.one_of(st.binary(max_size=6), st.sampled_from([b"", b"\x00", b"\xff" * 9]))


@st.composite
def table_entries(draw: st.DrawFn) -> p4runtime_pb2.Entity:
    e = p4runtime_pb2.Entity()
    te = e.table_entry
    te.table_id = draw(st.sampled_from(TABLE_IDS))
    te.priority = draw(st.sampled_from([0, 1, 10, 2**31 - 1]))
    te.is_default_action = draw(st.booleans())
    for _ in range(draw(st.integers(0, 3))):
        fm = te.match.add(field_id=draw(st.integers(0, 4)))
        kind = draw(st.sampled_from(["exact", "ternary", "lpm", "range", "optional"]))
        if kind == "exact":
            fm.exact.value = draw(byte_values)
        elif kind == "ternary":
            fm.ternary.value = draw(byte_values)
            fm.ternary.mask = draw(byte_values)
        elif kind == "lpm":
            fm.lpm.value = draw(byte_values)
            fm.lpm.prefix_len = draw(st.integers(-1, 40))
        elif kind == "range":
            fm.range.low = draw(byte_values)
            fm.range.high = draw(byte_values)
        else:
            fm.optional.value = draw(byte_values)
    if draw(st.booleans()):
        act = te.action.action
        act.action_id = draw(st.sampled_from(ACTION_IDS))
        for _ in range(draw(st.integers(0, 2))):
            act.params.add(param_id=draw(st.integers(0, 3)), value=draw(byte_values))
    return e


@st.composite
def other_entities(draw: st.DrawFn) -> p4runtime_pb2.Entity:
    e = p4runtime_pb2.Entity()
    which = draw(st.sampled_from(["counter", "register", "meter", "member", "pre"]))
    idx = draw(st.integers(-1, 10))
    if which == "counter":
        e.counter_entry.counter_id = draw(st.sampled_from([302055425, 0, 5]))
        if idx >= 0:
            e.counter_entry.index.index = idx
    elif which == "register":
        e.register_entry.register_id = draw(st.sampled_from([385875969, 0]))
        if idx >= 0:
            e.register_entry.index.index = idx
        e.register_entry.data.bitstring = draw(byte_values)
    elif which == "meter":
        e.meter_entry.meter_id = draw(st.sampled_from([335544321, 0]))
        e.meter_entry.config.cir = draw(st.integers(-5, 2**40))
        e.meter_entry.config.pir = draw(st.integers(-5, 2**40))
    elif which == "member":
        e.action_profile_member.action_profile_id = draw(st.sampled_from([285212673, 0]))
        e.action_profile_member.member_id = draw(st.integers(0, 5))
        e.action_profile_member.action.action_id = draw(st.sampled_from(ACTION_IDS))
    else:
        g = e.packet_replication_engine_entry.multicast_group_entry
        g.multicast_group_id = draw(st.integers(0, 5))
        for _ in range(draw(st.integers(0, 3))):
            g.replicas.add(port=draw(byte_values), instance=draw(st.integers(0, 3)))
    return e


entities = st.one_of(table_entries(), other_entities())
ALLOWED = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.OUT_OF_RANGE,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.UNIMPLEMENTED,
    grpc.StatusCode.FAILED_PRECONDITION,
}


def _check_rpc_error(err: grpc.RpcError) -> None:
    code = err.code()
    details = err.details() or ""
    assert "Exception calling application" not in details, details  # a server traceback
    if code == grpc.StatusCode.UNKNOWN:  # only as a Write batch failure with per-update details
        assert any(k == "grpc-status-details-bin" for k, _ in err.trailing_metadata() or ())
    else:
        assert code in ALLOWED, (code, details)


@settings(FUZZ, max_examples=200)
@given(st.lists(st.tuples(st.sampled_from([0, 1, 2, 3, 9]), entities), min_size=1, max_size=5))
def test_p4runtime_writes(
    p4rt: tuple[p4runtime_pb2_grpc.P4RuntimeStub, Any], updates: list[tuple[int, Any]]
) -> None:
    stub, _ = p4rt
    req = p4runtime_pb2.WriteRequest(device_id=1)
    req.election_id.low = 1
    for kind, ent in updates:
        req.updates.add(type=kind, entity=ent)
    try:
        stub.Write(req, timeout=10)
    except grpc.RpcError as err:
        _check_rpc_error(err)


@FUZZ
@given(st.lists(entities, min_size=1, max_size=3))
def test_p4runtime_reads(
    p4rt: tuple[p4runtime_pb2_grpc.P4RuntimeStub, Any], ents: list[Any]
) -> None:
    stub, _ = p4rt
    req = p4runtime_pb2.ReadRequest(device_id=1)
    for ent in ents:
        req.entities.add().CopyFrom(ent)
    try:
        for _ in stub.Read(req, timeout=10):
            pass
    except grpc.RpcError as err:
        _check_rpc_error(err)


@FUZZ
@given(
    st.lists(st.tuples(st.integers(0, 4), byte_values), max_size=4),
    st.binary(max_size=100),
)
def test_p4runtime_packet_outs(
    p4rt: tuple[p4runtime_pb2_grpc.P4RuntimeStub, Any],
    metadata: list[tuple[int, bytes]],
    payload: bytes,
) -> None:
    stub, client = p4rt
    req = p4runtime_pb2.StreamMessageRequest()
    req.packet.payload = payload
    for mid, value in metadata:
        req.packet.metadata.add(metadata_id=mid, value=value)
    client.stream_out_q.put(req)
    # The stream must stay up and primary: a Write with its election id is still accepted.
    write = p4runtime_pb2.WriteRequest(device_id=1)
    write.election_id.low = 1
    stub.Write(write, timeout=10)
