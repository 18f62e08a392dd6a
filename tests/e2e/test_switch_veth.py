"""ice-switch as a subprocess with veth ports in a network namespace, programmed over P4Runtime."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

if os.geteuid() != 0 or shutil.which("ip") is None:
    pytest.skip("needs root and the `ip` command for network namespaces", allow_module_level=True)

from p4.v1 import p4runtime_pb2  # noqa: E402
from p4runtime_sh.p4runtime import P4RuntimeClient  # noqa: E402
from scapy.layers.inet import IP, UDP  # noqa: E402
from scapy.layers.l2 import Ether  # noqa: E402

from icefabric.target.bench import PROGRAM  # noqa: E402
from icefabric.target.ports import VethLab, restore_vlan  # noqa: E402
from icefabric.waiting import Deadline, poll_until  # noqa: E402

Update = p4runtime_pb2.Update


@pytest.fixture
def lab() -> Iterator[VethLab]:
    try:
        with VethLab(f"ice-e2e-{os.getpid()}", pairs=2) as lab:
            yield lab
    except OSError as exc:
        pytest.skip(f"cannot create a network namespace: {exc}")


@pytest.fixture
def switch(lab: VethLab, tmp_path: Path) -> Iterator[str]:
    sock = f"unix:{tmp_path / 'p4rt.sock'}"
    proc = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            lab.name,
            sys.executable,
            "-m",
            "icefabric.target.cli",
            "-i",
            "1@s1",
            "-i",
            "2@s2",
            "--p4",
            str(PROGRAM),
            "--grpc-server-addr",
            sock,
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def started() -> bool:
            if proc.poll() is not None:
                pytest.fail(f"ice-switch exited: {proc.stderr.read() if proc.stderr else ''}")
            return (tmp_path / "p4rt.sock").exists()

        if not poll_until(started, 60, 0.1):
            pytest.fail("ice-switch did not start within 60 s")
        yield sock
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(timeout=20) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def entry(
    p4info: object,
    table: str,
    matches: list[tuple[str, bytes, int | None]],
    action: str,
    params: list[bytes],
) -> p4runtime_pb2.Entity:
    t = next(t for t in p4info.tables if t.preamble.name == table)  # type: ignore[attr-defined]
    a = next(a for a in p4info.actions if a.preamble.name == action)  # type: ignore[attr-defined]
    e = p4runtime_pb2.Entity()
    te = e.table_entry
    te.table_id = t.preamble.id
    for (name, value, plen), mf in zip(matches, t.match_fields, strict=True):
        assert mf.name == name
        fm = te.match.add(field_id=mf.id)
        if plen is None:
            fm.exact.value = value
        else:
            fm.lpm.value, fm.lpm.prefix_len = value, plen
    te.action.action.action_id = a.preamble.id
    for p, v in zip(a.params, params, strict=True):
        te.action.action.params.add(param_id=p.id, value=v)
    return e


def receive(sock: object, deadline: Deadline) -> list[bytes]:
    out = []
    sock.settimeout(0.1)  # type: ignore[attr-defined]
    while not deadline.expired:
        try:
            data, anc, _, _ = sock.recvmsg(65536, 256)  # type: ignore[attr-defined]
            out.append(restore_vlan(data, anc))  # the kernel moves VLAN tags to aux data
        except OSError:
            if out:
                break
    return out


def test_routes_packets_between_veth_ports(lab: VethLab, switch: str) -> None:
    client = P4RuntimeClient(0, switch, (0, 1))
    try:
        p4info = client.get_p4info()
        req = p4runtime_pb2.WriteRequest()
        for port in (1, 2):
            ent = entry(
                p4info,
                "MyIngress.port_vrf",
                [("std.ingress_port", bytes([port]), None)],
                "MyIngress.set_vrf",
                [b"\x01"],
            )
            req.updates.add(type=Update.INSERT, entity=ent)
        ent = entry(
            p4info,
            "MyIngress.routes",
            [("meta.vrf", b"\x01", None), ("hdr.ipv4.dstAddr", bytes([10, 0, 2, 0]), 24)],
            "MyIngress.set_nhop",
            [b"\x07"],
        )
        req.updates.add(type=Update.INSERT, entity=ent)
        ent = entry(
            p4info,
            "MyIngress.nhops",
            [("meta.nhop", b"\x07", None)],
            "MyIngress.rewrite",
            [bytes.fromhex("020000000002"), bytes.fromhex("02000000aaaa"), b"\x02"],
        )
        req.updates.add(type=Update.INSERT, entity=ent)
        client.write(req)
    finally:
        client.tear_down()
    h1 = lab.socket("h1")
    h2 = lab.socket("h2")
    try:
        good = (
            Ether(dst="02:00:00:00:00:01", src="02:00:00:00:00:09")
            / IP(src="10.0.1.1", dst="10.0.2.2", ttl=64)
            / UDP(sport=1234, dport=4321)
            / (b"x" * 32)
        )
        lost = Ether(dst="02:00:00:00:00:01") / IP(src="10.0.1.1", dst="10.9.9.9") / UDP() / b"y"
        h1.send(bytes(lost))
        for _ in range(5):
            h1.send(bytes(good))
        got = receive(h2, Deadline(10))
        assert len(got) == 5
        pkt = Ether(got[0])
        assert pkt.dst == "02:00:00:00:00:02" and pkt.src == "02:00:00:00:aa:aa"
        assert pkt[IP].ttl == 63 and pkt[IP].dst == "10.0.2.2"
        chk = pkt[IP].chksum
        del pkt[IP].chksum
        assert Ether(bytes(pkt))[IP].chksum == chk  # the switch recomputed the checksum
        assert bytes(pkt[UDP].payload) == b"x" * 32
        assert receive(h1, Deadline(0.5)) == []  # nothing reflected back to h1
    finally:
        h1.close()
        h2.close()


WIRE_P4 = r"""
#include <core.p4>
#include <v1model.p4>
struct h_t { }
struct m_t { }
parser P(packet_in p, out h_t h, inout m_t m, inout standard_metadata_t s) { state start { transition accept; } }
control VC(inout h_t h, inout m_t m) { apply { } }
control I(inout h_t h, inout m_t m, inout standard_metadata_t s) {
    apply { s.egress_spec = s.ingress_port == 1 ? (bit<9>)2 : (bit<9>)1; }
}
control E(inout h_t h, inout m_t m, inout standard_metadata_t s) { apply { } }
control CC(inout h_t h, inout m_t m) { apply { } }
control D(packet_out p, in h_t h) { apply { } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_raw_ports_keep_vlan_tags_and_ignore_own_transmissions(lab: VethLab) -> None:
    from scapy.layers.l2 import Dot1Q

    from icefabric.target.compiler import compile_source
    from icefabric.target.device import Device
    from icefabric.target.ports import RawPort

    dev = Device()
    dev.set_program(compile_source(WIRE_P4, filename="wire.p4"))
    ports = [RawPort(p, f"s{p}", dev, sock=lab.socket(f"s{p}")) for p in (1, 2)]
    for rp in ports:
        dev.attach_port(rp.port, rp.send)
    h1, h2 = lab.socket("h1"), lab.socket("h2")
    dev.start()
    for rp in ports:
        rp.start()
    try:
        frame = bytes(
            Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01")
            / Dot1Q(vlan=42, prio=3)
            / IP(dst="10.0.0.2")
            / UDP()
            / b"tagged"
        )
        h1.send(frame)
        got = receive(h2, Deadline(5))
        assert got == [frame]
        assert ports[0].rx == 1 and ports[1].rx == 0  # s2 did not read back what it sent
    finally:
        for rp in ports:
            rp.close()
        dev.stop()
        h1.close()
        h2.close()
