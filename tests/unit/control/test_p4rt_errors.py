"""P4RuntimeError wraps grpc.RpcError once; PipelineConfig builds per target (no switch)."""

from __future__ import annotations

import pickle
from pathlib import Path

import grpc
import pytest
from google.protobuf import any_pb2
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2

from icefabric.control.p4rt import P4InfoError, P4InfoIndex, P4RuntimeError, PipelineConfig
from icefabric.control.p4rt.errors import code_name
from icefabric.control.p4rt.pipeline import PipelineConfigError

FIXTURE = Path(__file__).parent / "p4" / "l3_fixture.p4info.txtpb"


class FakeCall(grpc.RpcError, grpc.Call):  # type: ignore[misc]
    """An RpcError as a unary call raises it, with the trailing metadata a server sent."""

    def __init__(self, code: grpc.StatusCode, details: str, trailing: tuple = ()) -> None:
        self._code, self._details, self._trailing = code, details, trailing

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> tuple:
        return self._trailing

    def initial_metadata(self) -> tuple:
        return ()

    def is_active(self) -> bool:
        return False

    def time_remaining(self) -> None:
        return None

    def cancel(self) -> bool:
        return False

    def add_callback(self, callback: object) -> bool:
        return False


def _status_trailer(*errors: p4runtime_pb2.Error, message: str = "write failure") -> tuple:
    status = status_pb2.Status(code=code_pb2.UNKNOWN, message=message)
    for e in errors:
        packed = any_pb2.Any()
        packed.Pack(e)
        status.details.append(packed)
    return (("grpc-status-details-bin", status.SerializeToString()),)


def test_per_update_errors_are_decoded_with_index_entity_and_table() -> None:
    trailer = _status_trailer(
        p4runtime_pb2.Error(canonical_code=code_pb2.OK),
        p4runtime_pb2.Error(
            canonical_code=code_pb2.ALREADY_EXISTS, message="dup", space="t", code=7
        ),
        p4runtime_pb2.Error(canonical_code=code_pb2.INVALID_ARGUMENT, message="bad port"),
    )
    rpc = FakeCall(grpc.StatusCode.UNKNOWN, "ignored", trailer)
    described = {
        1: ("INSERT table_entry MyIngress.ipv4_lpm", "MyIngress.ipv4_lpm"),
        2: ("MODIFY table_entry MyIngress.acl", "MyIngress.acl"),
    }
    err = P4RuntimeError.from_rpc_error(
        rpc, operation="Write", switch="leaf1", describe=described.__getitem__, index_offset=100
    )
    assert err.code == grpc.StatusCode.UNKNOWN
    assert err.message == "write failure"
    assert [(d.index, d.code, d.message) for d in err.details] == [
        (101, grpc.StatusCode.ALREADY_EXISTS, "dup"),
        (102, grpc.StatusCode.INVALID_ARGUMENT, "bad port"),
    ]
    assert err.details[0].space == "t" and err.details[0].target_code == 7
    assert err.tables == ["MyIngress.acl", "MyIngress.ipv4_lpm"]
    text = str(err)
    assert text.startswith("leaf1 Write: UNKNOWN: write failure")
    assert "update #101: ALREADY_EXISTS: dup [INSERT table_entry MyIngress.ipv4_lpm]" in text
    again = pickle.loads(pickle.dumps(err))
    assert again.details == err.details and str(again) == text


def test_plain_rpc_errors_keep_code_and_message() -> None:
    err = P4RuntimeError.from_rpc_error(FakeCall(grpc.StatusCode.UNAVAILABLE, "connection refused"))
    assert err.code == grpc.StatusCode.UNAVAILABLE
    assert err.message == "connection refused" and err.details == []
    assert str(err) == "UNAVAILABLE: connection refused"


def test_malformed_status_trailer_does_not_hide_the_error() -> None:
    rpc = FakeCall(grpc.StatusCode.INTERNAL, "boom", (("grpc-status-details-bin", b"\xff\xff"),))
    err = P4RuntimeError.from_rpc_error(rpc)
    assert err.code == grpc.StatusCode.INTERNAL and err.message == "boom"


def test_non_p4_details_are_skipped() -> None:
    status = status_pb2.Status(code=code_pb2.UNKNOWN, message="m")
    other = any_pb2.Any()
    other.Pack(status_pb2.Status(code=1))
    status.details.append(other)
    rpc = FakeCall(
        grpc.StatusCode.UNKNOWN, "m", (("grpc-status-details-bin", status.SerializeToString()),)
    )
    assert P4RuntimeError.from_rpc_error(rpc).details == []


def test_code_names() -> None:
    assert code_name(6) == "ALREADY_EXISTS"
    assert code_name(999) == "999"


def test_pipeline_for_bmv2_reads_json_and_p4info(tmp_path: Path) -> None:
    js = tmp_path / "l3.json"
    js.write_bytes(b'{"program": "l3.p4"}')
    cfg = PipelineConfig.for_bmv2(js, FIXTURE)
    assert cfg.kind == "bmv2" and cfg.device_config == b'{"program": "l3.p4"}'
    assert cfg.p4info == P4InfoIndex.load(FIXTURE).p4info
    assert cfg.cookie == PipelineConfig.for_bmv2(js, FIXTURE).cookie != 0
    msg = cfg.encode()
    assert msg.p4_device_config == cfg.device_config and msg.cookie.cookie == cfg.cookie
    back = PipelineConfig.decode(msg)
    assert back.p4info == cfg.p4info and back.cookie == cfg.cookie
    assert cfg.index is cfg.index
    assert PipelineConfig.from_target("bmv2", bmv2_json=js, p4info=FIXTURE).kind == "bmv2"


def test_pipeline_errors_name_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(PipelineConfigError, match=r"nope\.json: cannot read the BMv2 JSON"):
        PipelineConfig.for_bmv2(tmp_path / "nope.json", FIXTURE)
    js = tmp_path / "l3.json"
    js.write_text("{}")
    with pytest.raises(P4InfoError, match=r"missing\.txtpb: cannot read the P4Info"):
        PipelineConfig.for_bmv2(js, tmp_path / "missing.txtpb")
    with pytest.raises(PipelineConfigError, match="no such P4 program"):
        PipelineConfig.for_embedded(tmp_path / "absent.p4")
    with pytest.raises(PipelineConfigError, match="unknown target kind 'psa'"):
        PipelineConfig.from_target("psa")
    with pytest.raises(PipelineConfigError, match="'tofino' needs tofino_out"):
        PipelineConfig.from_target("tofino")
    with pytest.raises(PipelineConfigError, match="'embedded' needs p4_main"):
        PipelineConfig.from_target("embedded")
    with pytest.raises(PipelineConfigError, match="'bmv2' needs bmv2_json and p4info"):
        PipelineConfig.from_target("bmv2", bmv2_json=js)
