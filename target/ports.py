"""Switch ports on Linux interfaces (AF_PACKET raw sockets) and network-namespace helpers."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import select
import socket
import struct
import threading
from collections.abc import Iterator
from typing import Protocol

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_ADD_MEMBERSHIP = 1
PACKET_MR_PROMISC = 1
PACKET_IGNORE_OUTGOING = 23
PACKET_OUTGOING = 4
PACKET_AUXDATA = 8
TP_STATUS_VLAN_VALID = 0x10
TP_STATUS_VLAN_TPID_VALID = 0x40
_AUXDATA = struct.Struct("IIIHHHH")  # struct tpacket_auxdata
CLONE_NEWNET = 0x40000000
MAX_FRAME = 65536

log = logging.getLogger(__name__)


class PortSink(Protocol):
    """What a port delivers received frames to (a Device)."""

    def inject(self, port: int, data: bytes) -> None:
        """A frame arrived on `port`."""


def parse_port_spec(spec: str) -> tuple[int, str]:
    """'1@veth1' -> (1, 'veth1'); ValueError with a clear message otherwise."""
    num, sep, iface = spec.partition("@")
    if not sep or not iface or not num.strip().isdigit():
        raise ValueError(f"bad interface spec {spec!r}: expected PORT@IFACE, e.g. 1@veth1")
    port = int(num)
    if not 0 <= port < 511:
        raise ValueError(f"bad interface spec {spec!r}: port must be in [0, 510]")
    if len(iface) > 15:
        raise ValueError(f"bad interface spec {spec!r}: interface names have at most 15 characters")
    return port, iface


def open_raw_socket(iface: str) -> socket.socket:
    """An AF_PACKET socket bound to `iface`, promiscuous, not seeing its own transmissions."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    try:
        sock.bind((iface, 0))
        ifindex = socket.if_nametoindex(iface)
        mreq = struct.pack("iHH8s", ifindex, PACKET_MR_PROMISC, 0, b"")
        sock.setsockopt(SOL_PACKET, PACKET_ADD_MEMBERSHIP, mreq)
        with contextlib.suppress(OSError):  # Linux >= 4.20; else filtered by pkttype below
            sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        # the kernel strips a received VLAN tag into ancillary data: ask for it to put it back
        sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    except OSError:
        sock.close()
        raise
    return sock


class RawPort:
    """One switch port on a Linux interface: a receive thread feeding the device, and send()."""

    def __init__(
        self, port: int, iface: str, sink: PortSink, *, sock: socket.socket | None = None
    ) -> None:
        self.port = port
        self.iface = iface
        self.sink = sink
        self.sock = sock or open_raw_socket(iface)
        self.rx = 0
        self.tx = 0
        self.tx_errors = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start receiving."""
        self._thread = threading.Thread(
            target=self._rx_loop, name=f"port-{self.port}-{self.iface}", daemon=True
        )
        self._thread.start()

    def send(self, data: bytes) -> None:
        """Transmit one frame."""
        try:
            self.sock.send(data)
            self.tx += 1
        except OSError as exc:
            self.tx_errors += 1
            log.debug("port %d (%s): send failed: %s", self.port, self.iface, exc)

    def _rx_loop(self) -> None:
        sock = self.sock
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([sock], [], [], 0.2)
                if not ready:
                    continue
                data, ancdata, _, addr = sock.recvmsg(MAX_FRAME, socket.CMSG_SPACE(_AUXDATA.size))
            except OSError as exc:
                if not self._stop.is_set():
                    log.error("port %d (%s): receive failed: %s", self.port, self.iface, exc)
                return
            if addr[2] == PACKET_OUTGOING:
                continue
            data = restore_vlan(data, ancdata)
            self.rx += 1
            self.sink.inject(self.port, data)

    def close(self) -> None:
        """Stop the receive thread and close the socket."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)
        self.sock.close()


def restore_vlan(data: bytes, ancdata: list[tuple[int, int, bytes]]) -> bytes:
    """Re-insert a VLAN tag the kernel moved into PACKET_AUXDATA (as the wire carried it)."""
    for level, kind, raw in ancdata:
        if level != SOL_PACKET or kind != PACKET_AUXDATA or len(raw) < _AUXDATA.size:
            continue
        status, _, _, _, _, tci, tpid = _AUXDATA.unpack_from(raw)
        if status & TP_STATUS_VLAN_VALID or tci:
            if not status & TP_STATUS_VLAN_TPID_VALID:
                tpid = 0x8100
            return data[:12] + struct.pack("!HH", tpid, tci) + data[12:]
    return data


# --- network namespaces --------------------------------------------------------------------
def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


@contextlib.contextmanager
def in_netns(name: str) -> Iterator[None]:
    """Run the body (this thread only) inside network namespace `name` (/run/netns/NAME).

    Sockets created in the body stay in that namespace after it ends.
    """
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        target = os.open(f"/run/netns/{name}", os.O_RDONLY)
        try:
            _setns(target)
        finally:
            os.close(target)
        try:
            yield
        finally:
            _setns(own)
    finally:
        os.close(own)


class VethLab:
    """A network namespace with veth pairs (host end, switch end) for tests and benchmarks.

    `with VethLab("ice-t1", pairs=2) as lab:` makes namespace ice-t1 with h1<->s1, h2<->s2
    (all up, IPv6 off so the kernel sends nothing of its own); the namespace is deleted on exit.
    """

    def __init__(self, name: str, pairs: int = 2) -> None:
        self.name = name
        self.pairs = pairs

    def _ip(self, *args: str) -> None:
        import subprocess

        proc = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise OSError(f"ip {' '.join(args)}: {proc.stderr.strip()}")

    def __enter__(self) -> VethLab:
        import subprocess

        subprocess.run(["ip", "netns", "del", self.name], capture_output=True, check=False)
        self._ip("netns", "add", self.name)
        try:
            with contextlib.suppress(OSError):
                self._ip(
                    "netns", "exec", self.name, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"
                )
                self._ip(
                    "netns",
                    "exec",
                    self.name,
                    "sysctl",
                    "-qw",
                    "net.ipv6.conf.default.disable_ipv6=1",
                )
            for i in range(1, self.pairs + 1):
                self._ip(
                    "-n", self.name, "link", "add", f"h{i}", "type", "veth", "peer", "name", f"s{i}"
                )
                self._ip("-n", self.name, "link", "set", f"h{i}", "up")
                self._ip("-n", self.name, "link", "set", f"s{i}", "up")
            self._ip("-n", self.name, "link", "set", "lo", "up")
        except OSError:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        import subprocess

        subprocess.run(["ip", "netns", "del", self.name], capture_output=True, check=False)

    def socket(self, iface: str) -> socket.socket:
        """A raw socket on `iface` inside the namespace."""
        with in_netns(self.name):
            return open_raw_socket(iface)
