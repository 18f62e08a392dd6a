"""Tofino device configs: bf-p4c output folder -> Stratum BfPipelineConfig / PI legacy bytes."""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from icefabric.control.p4rt import PipelineConfig
from icefabric.control.p4rt.pipeline import PipelineConfigError
from icefabric.control.p4rt.tofino import (
    TofinoConfigError,
    TofinoProfile,
    TofinoProgram,
    decode_bf_pipeline_config,
    decode_legacy,
    encode_bf_pipeline_config,
    encode_legacy,
    load_bf_p4c_output,
)


def _program() -> TofinoProgram:
    return TofinoProgram(
        name="ice",
        bfrt=b'{"t":1}',
        profiles=(
            TofinoProfile(name="pipe", context=b"{}", binary=b"\x00\x01", pipe_scope=(0, 1)),
        ),
    )


def test_bf_pipeline_config_bytes_follow_the_proto_field_by_field() -> None:
    # Built by hand from bf.proto: key = field number << 3 | 2 (length-delimited), then length.
    profile = (
        b"\x0a\x04pipe"  # 1 profile_name
        + b"\x12\x02{}"  # 2 context
        + b"\x1a\x02\x00\x01"  # 3 binary
        + b"\x22\x02\x00\x01"  # 4 pipe_scope, packed varints 0, 1
    )
    want = b"\x0a\x03ice" + b"\x12\x07" + b'{"t":1}' + b"\x1a" + bytes([len(profile)]) + profile
    assert encode_bf_pipeline_config(_program()) == want


def test_bf_pipeline_config_parses_with_a_protobuf_built_from_the_proto() -> None:
    # An independent reader: the message described with protobuf's own descriptors.
    f = descriptor_pb2.FileDescriptorProto(name="bf_test.proto", package="t", syntax="proto3")
    msg = f.message_type.add(name="BfPipelineConfig")
    T = descriptor_pb2.FieldDescriptorProto
    prof = msg.nested_type.add(name="Profile")
    for num, name, typ in (
        (1, "profile_name", T.TYPE_STRING),
        (2, "context", T.TYPE_BYTES),
        (3, "binary", T.TYPE_BYTES),
    ):
        prof.field.add(name=name, number=num, type=typ, label=T.LABEL_OPTIONAL)
    prof.field.add(name="pipe_scope", number=4, type=T.TYPE_UINT32, label=T.LABEL_REPEATED)
    msg.field.add(name="p4_name", number=1, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    msg.field.add(name="bfruntime_info", number=2, type=T.TYPE_BYTES, label=T.LABEL_OPTIONAL)
    msg.field.add(
        name="profiles",
        number=3,
        type=T.TYPE_MESSAGE,
        label=T.LABEL_REPEATED,
        type_name=".t.BfPipelineConfig.Profile",
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    cls = message_factory.MessageFactory(pool).GetPrototype(
        pool.FindMessageTypeByName("t.BfPipelineConfig")
    )
    m = cls()
    m.ParseFromString(encode_bf_pipeline_config(_program()))
    assert m.p4_name == "ice" and m.bfruntime_info == b'{"t":1}'
    assert [(p.profile_name, p.context, p.binary, list(p.pipe_scope)) for p in m.profiles] == [
        ("pipe", b"{}", b"\x00\x01", [0, 1])
    ]
    # ... and what protobuf writes, the decoder reads.
    assert decode_bf_pipeline_config(m.SerializeToString()) == _program()


def test_legacy_packing_is_three_little_endian_length_prefixed_fields() -> None:
    data = encode_legacy(_program())
    assert data == (
        struct.pack("<I", 3)
        + b"ice"
        + struct.pack("<I", 2)
        + b"\x00\x01"
        + struct.pack("<I", 2)
        + b"{}"
    )
    assert decode_legacy(data) == ("ice", b"\x00\x01", b"{}")
    with pytest.raises(TofinoConfigError, match="runs past the end"):
        decode_legacy(data[:-1])
    two = TofinoProgram(name="x", bfrt=b"", profiles=(_program().profiles[0],) * 2)
    with pytest.raises(TofinoConfigError, match="exactly one pipeline"):
        encode_legacy(two)


def _bf_out(
    tmp: Path,
    *,
    conf: bool = True,
    chip: str = "tofino",
    paths: str = "sde",
    bfrt: str = "bf-rt.json",
) -> Path:
    out = tmp / "ice.tofino"
    (out / "pipe").mkdir(parents=True)
    (out / bfrt).write_bytes(b'{"tables":[]}')
    (out / "pipe" / "context.json").write_bytes(b'{"ctx":1}')
    (out / "pipe" / f"{chip}.bin").write_bytes(b"BIN")
    if conf:
        if paths == "sde":
            # As the SDE installs it: paths under share/tofinopd, not as in this folder.
            where = "share/tofinopd/ice"
        else:
            # As bf-p4c's driver has p4c-gen-conf write it for `-o build/tna/tofino`
            # (backends/tofino/scripts/p4c-gen-conf: installdir = outputdir, as given).
            where = "build/tna/tofino"
        doc = {
            "chip_list": [{"chip_family": chip, "instance": 0}],
            "p4_devices": [
                {
                    "device-id": 0,
                    "p4_programs": [
                        {
                            "program-name": "ice",
                            "bfrt-config": f"{where}/{bfrt}",
                            "p4_pipelines": [
                                {
                                    "p4_pipeline_name": "pipe",
                                    "context": f"{where}/pipe/context.json",
                                    "config": f"{where}/pipe/{chip}.bin",
                                    "pipe_scope": [0, 1, 2, 3],
                                    "path": where,
                                }
                            ],
                        }
                    ],
                }
            ],
        }
        (out / "ice.conf").write_text(json.dumps(doc))
    return out


@pytest.mark.parametrize(
    ("paths", "bfrt"), [("sde", "bf-rt.json"), ("driver", "bfrt.json")], ids=["sde", "bf-p4c"]
)
def test_output_folder_with_conf_resolves_its_paths_inside_the_folder(
    tmp_path: Path, paths: str, bfrt: str
) -> None:
    prog = load_bf_p4c_output(_bf_out(tmp_path, paths=paths, bfrt=bfrt))
    assert prog.name == "ice" and prog.bfrt == b'{"tables":[]}'
    (p,) = prog.profiles
    assert (p.name, p.context, p.binary, p.pipe_scope) == (
        "pipe",
        b'{"ctx":1}',
        b"BIN",
        (0, 1, 2, 3),
    )


@pytest.mark.parametrize("bfrt", ["bfrt.json", "bf-rt.json"])
def test_output_folder_without_conf_uses_the_layout_tofino2_too(tmp_path: Path, bfrt: str) -> None:
    out = _bf_out(tmp_path, conf=False, chip="tofino2", bfrt=bfrt)
    prog = load_bf_p4c_output(out, program="ice")
    assert prog.name == "ice" and prog.profiles[0].binary == b"BIN"
    assert prog.bfrt == b'{"tables":[]}'
    (out / bfrt).unlink()
    with pytest.raises(TofinoConfigError, match=r"no <program>\.conf and no bfrt\.json or bf-rt"):
        load_bf_p4c_output(out)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda out: (out / "pipe" / "context.json").unlink(), "context.json"),
        (lambda out: (out / "ice.conf").write_text("{not json"), "not JSON"),
        (lambda out: (out / "ice.conf").write_text('{"p4_devices": 3}'), "p4_devices"),
    ],
)
def test_damaged_output_folders_are_named_errors(tmp_path: Path, damage, message: str) -> None:  # type: ignore[no-untyped-def]
    out = _bf_out(tmp_path)
    damage(out)
    with pytest.raises(TofinoConfigError, match=message):
        load_bf_p4c_output(out)
    with pytest.raises(TofinoConfigError, match="not a folder"):
        load_bf_p4c_output(tmp_path / "nothing")


def test_pipeline_config_for_tofino_packs_the_folder_with_its_p4info(tmp_path: Path) -> None:
    out = _bf_out(tmp_path)
    (out / "p4info.txt").write_text('pkg_info { arch: "tna" }\n')
    cfg = PipelineConfig.for_tofino(out)
    assert cfg.kind == "tofino" and cfg.p4info.pkg_info.arch == "tna"
    assert decode_bf_pipeline_config(cfg.device_config).profiles[0].binary == b"BIN"
    legacy = PipelineConfig.from_target("tofino", tofino_out=out, tofino_format="legacy")
    assert decode_legacy(legacy.device_config) == ("ice", b"BIN", b'{"ctx":1}')
    (out / "p4info.txt").unlink()
    with pytest.raises(PipelineConfigError, match="no P4Info"):
        PipelineConfig.for_tofino(out)
    with pytest.raises(PipelineConfigError, match="unknown Tofino config format"):
        PipelineConfig.for_tofino(out, tmp_path / "x", fmt="zip")


# The files `bf-p4c --std p4-16 --p4runtime-force-std-externs --verbose 1 --target tofino2 --arch
# t2na -o OUT --p4runtime-files OUT/p4info.txt p4src/tna/ice.p4` wrote (p4c 34b86e9), with their
# sizes in bytes: a manifest that names ice.conf, and no ice.conf.
BF_P4C_TOFINO2_FILES = {
    "bfrt.json": 720_580,
    "events.json": 323,
    "source.json": 530_096,
    "pipe/context.json": 7_701_872,
    "pipe/ice.bfa": 311_362,
    "pipe/tofino2.bin": 1_994_098,
}


def test_pipeline_config_from_an_output_folder_as_bf_p4c_wrote_it(tmp_path: Path) -> None:
    # What `icectl run --target tofino --tofino-out OUT` packs (PipelineConfig.for_tofino), for a
    # folder laid out and sized as bf-p4c's own (tests/tofino checks the compiled one itself).
    out = tmp_path / "build-tna-tofino2"
    rng = random.Random(22)
    for name, size in BF_P4C_TOFINO2_FILES.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(rng.randbytes(size))
    manifest = {
        "target": "tofino2",
        "target_data": {"architecture": "t2na", "conf_file": "ice.conf"},
        "programs": [{"program_name": "ice.p4", "p4_version": "p4-16"}],
    }
    (out / "manifest.json").write_text(json.dumps(manifest))
    (out / "p4info.txt").write_text('pkg_info { arch: "t2na" }\n')
    cfg = PipelineConfig.for_tofino(out)
    assert cfg.p4info.pkg_info.arch == "t2na"
    prog = decode_bf_pipeline_config(cfg.device_config)
    assert prog.name == "ice"  # from the manifest, not the folder's name
    assert len(prog.bfrt) == 720_580 and prog.bfrt == (out / "bfrt.json").read_bytes()
    (p,) = prog.profiles
    assert p.name == "pipe"
    assert len(p.binary) == 1_994_098 and p.binary == (out / "pipe" / "tofino2.bin").read_bytes()
    assert len(p.context) == 7_701_872 and p.context == (out / "pipe" / "context.json").read_bytes()
    (out / "manifest.json").write_text('{"programs": []}')
    with pytest.raises(TofinoConfigError, match=r"manifest.json: expected programs\[0\]"):
        load_bf_p4c_output(out)
    (out / "manifest.json").unlink()
    assert load_bf_p4c_output(out).name == "build-tna-tofino2"


def test_run_target_tofino_writes_its_options_in_the_tna_programs_units(tmp_path: Path) -> None:
    # `icectl run --target tofino`: ECN thresholds in cells, mirror truncation, and the flowlet
    # timeout / sampling gap in the TNA ingress clock's 1,024 ns ticks.
    import argparse

    from icefabric.control import fabric_targets
    from icefabric.control.daemon import service
    from icefabric.topo.spec import load_topology

    out = _bf_out(tmp_path)
    (out / "p4info.txt").write_text('pkg_info { arch: "tna" }\n')
    spec = load_topology(
        Path(__file__).resolve().parents[3] / "topo" / "examples" / "leaf_spine_2x2.yaml"
    )
    args = argparse.Namespace(
        target="tofino",
        tofino_out=out,
        p4info=None,
        tofino_format="bfrt",
        cpu_port=None,
        mode="ice",
        bmv2_json=None,
        p4=None,
    )
    pipeline, _, options = service._pipeline_and_options(args, spec)
    assert pipeline.kind == "tofino"
    assert options.switch_clock_ns == fabric_targets.TOFINO_INGRESS_CLOCK_NS
    assert options.ecn_kmin == fabric_targets.TOFINO_ECN_KMIN_CELLS
    assert options.clone_packet_length == fabric_targets.TOFINO_CLONE_PACKET_LENGTH
    assert not options.feedback_class_of_service  # PI refuses a clone class of service
