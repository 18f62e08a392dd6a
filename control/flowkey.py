"""One RoCEv2 flow key: the packet fields that name one queue pair's traffic, in one class.

The same value is what a host agent reports for a flow and gets caps for (the agent channel,
``agents/protocol.py``), the first hop's ``flow_path`` match the controller installs
(``install.py``), what ice.p4's ECMP hash reads (``planner/ecmp.py``, :meth:`FlowKey.hash_input`),
and the key of the hosts' endpoints and agents (``traffic/``). A planned flow's key
(:meth:`FlowKey.of_flow`) has its hosts' addresses and the job's UDP source port and QP, or the
deterministic stand-ins of ``ccl/demand.py`` when the job does not give them.

The RoCEv2 port is ice.p4's ``UDP_PORT_ROCEV2`` (``icefabric.p4src.ice_p4``, generated from
the program), under the name the Python side uses. Two JSON forms, both kept as they were: :meth:`FlowKey.to_dict` is the agent channel's and the
state file's (``sport``, ``dport``, ``qp``), :meth:`FlowKey.match_dict` the ``flow_path`` match
as icectl shows it (``udp_sport``, ``dst_qp``).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from icefabric.p4src import ice_p4

if TYPE_CHECKING:
    from icefabric.control.ccl.demand import Flow
    from icefabric.control.topology import Topology

ROCE_UDP_PORT: Final = ice_p4.UDP_PORT_ROCEV2  # RoCEv2's UDP destination port, as ice.p4 parses it
PROTO_UDP: Final = ice_p4.IP_PROTO_UDP


@dataclass(slots=True, frozen=True, kw_only=True)
class FlowKey:
    """What names one RoCEv2 queue pair's traffic on the wire: the 5-tuple and the destination QP."""

    src_ip: str
    dst_ip: str
    udp_sport: int
    dst_qp: int
    udp_dport: int = ROCE_UDP_PORT

    @classmethod
    def of_flow(cls, topo: Topology, flow: Flow) -> FlowKey:
        """The key of a planned flow: its hosts' addresses, the job's UDP source port and QP or
        their stand-ins (``Flow.entropy_sport``, ``Flow.entropy_qp``)."""
        return cls(
            src_ip=topo.spec.host(flow.src_host).address,
            dst_ip=topo.spec.host(flow.dst_host).address,
            udp_sport=flow.entropy_sport(),
            dst_qp=flow.entropy_qp(),
        )

    def hash_input(self, *, use_qp_in_hash: bool) -> bytes:
        """The bytes ice.p4's ECMP crc32 runs over: src_ip, dst_ip, protocol, udp_sport,
        udp_dport (and dst_qp), packed big-endian in the program's order."""
        out = (
            int(ipaddress.IPv4Address(self.src_ip)).to_bytes(4, "big")
            + int(ipaddress.IPv4Address(self.dst_ip)).to_bytes(4, "big")
            + PROTO_UDP.to_bytes(1, "big")
            + (self.udp_sport & 0xFFFF).to_bytes(2, "big")
            + (self.udp_dport & 0xFFFF).to_bytes(2, "big")
        )
        if use_qp_in_hash:
            out += (self.dst_qp & 0xFFFFFF).to_bytes(3, "big")
        return out

    def to_dict(self) -> dict[str, Any]:
        """The agent channel's and the state file's form (read back by
        ``agents.protocol.key_from_dict``)."""
        return {
            "src_ip": self.src_ip,
            "dst_ip": self.dst_ip,
            "sport": self.udp_sport,
            "dport": self.udp_dport,
            "qp": self.dst_qp,
        }

    def match_dict(self) -> dict[str, Any]:
        """The ``flow_path`` match as icectl shows it (``paths``, ``plan``)."""
        return {
            "src_ip": self.src_ip,
            "dst_ip": self.dst_ip,
            "udp_sport": self.udp_sport,
            "dst_qp": self.dst_qp,
        }

    def __str__(self) -> str:
        return f"{self.src_ip}:{self.udp_sport}->{self.dst_ip}:{self.udp_dport} qp {self.dst_qp}"
