"""Counters, meters, registers (indexed and direct) and digest configuration entities."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from p4.v1 import p4data_pb2, p4runtime_pb2

from .codec import Value, decode_int, encode_value
from .errors import EncodeError
from .p4info import P4InfoIndex
from .tables import CounterData, MeterConfig, TableEntry


@dataclass(slots=True, frozen=True, kw_only=True)
class CounterEntry:
    """One cell of an indexed counter (index None reads every cell; no counter reads all)."""

    ENTITY_FIELD: ClassVar[str] = "counter_entry"

    counter: str = ""
    index: int | None = None
    data: CounterData | None = None

    def encode(self, p4info: P4InfoIndex) -> p4runtime_pb2.CounterEntry:
        """The p4.v1.CounterEntry message."""
        msg = p4runtime_pb2.CounterEntry()
        if self.counter:
            msg.counter_id = p4info.counter(self.counter).id
        if self.index is not None:
            msg.index.index = self.index
        if self.data is not None:
            msg.data.CopyFrom(self.data.encode())
        return msg

    @classmethod
    def decode(cls, msg: p4runtime_pb2.CounterEntry, p4info: P4InfoIndex) -> CounterEntry:
        """From a p4.v1.CounterEntry message."""
        return cls(
            counter=p4info.counter(msg.counter_id).name if msg.counter_id else "",
            index=msg.index.index if msg.HasField("index") else None,
            data=CounterData.decode(msg.data) if msg.HasField("data") else None,
        )

    def describe(self, p4info: P4InfoIndex | None = None) -> str:
        """Short human summary."""
        return f"counter_entry {self.counter or '*'}[{'*' if self.index is None else self.index}]"


@dataclass(slots=True, frozen=True, kw_only=True)
class DirectCounterEntry:
    """The direct counter of one table entry (a table-only entry reads the whole table)."""

    ENTITY_FIELD: ClassVar[str] = "direct_counter_entry"

    table_entry: TableEntry
    data: CounterData | None = None

    def encode(self, p4info: P4InfoIndex) -> p4runtime_pb2.DirectCounterEntry:
        """The p4.v1.DirectCounterEntry message."""
        msg = p4runtime_pb2.DirectCounterEntry()
        msg.table_entry.CopyFrom(self.table_entry.encode(p4info))
        if self.data is not None:
            msg.data.CopyFrom(self.data.encode())
        return msg

    @classmethod
    def decode(
        cls, msg: p4runtime_pb2.DirectCounterEntry, p4info: P4InfoIndex
    ) -> DirectCounterEntry:
        """From a p4.v1.DirectCounterEntry message."""
        return cls(
            table_entry=TableEntry.decode(msg.table_entry, p4info),
            data=CounterData.decode(msg.data) if msg.HasField("data") else None,
        )

    def describe(self, p4info: P4InfoIndex | None = None) -> str:
        """Short human summary."""
        return f"direct_counter_entry of {self.table_entry.describe(p4info)}"


@dataclass(slots=True, frozen=True, kw_only=True)
class MeterEntry:
    """One cell of an indexed meter (index None reads every cell)."""

    ENTITY_FIELD: ClassVar[str] = "meter_entry"

    meter: str = ""
    index: int | None = None
    config: MeterConfig | None = None

    def encode(self, p4info: P4InfoIndex) -> p4runtime_pb2.MeterEntry:
        """The p4.v1.MeterEntry message."""
        msg = p4runtime_pb2.MeterEntry()
        if self.meter:
            msg.meter_id = p4info.meter(self.meter).id
        if self.index is not None:
            msg.index.index = self.index
        if self.config is not None:
            msg.config.CopyFrom(self.config.encode())
        return msg

    @classmethod
    def decode(cls, msg: p4runtime_pb2.MeterEntry, p4info: P4InfoIndex) -> MeterEntry:
        """From a p4.v1.MeterEntry message."""
        return cls(
            meter=p4info.meter(msg.meter_id).name if msg.meter_id else "",
            index=msg.index.index if msg.HasField("index") else None,
            config=MeterConfig.decode(msg.config) if msg.HasField("config") else None,
        )

    def describe(self, p4info: P4InfoIndex | None = None) -> str:
        """Short human summary."""
        return f"meter_entry {self.meter or '*'}[{'*' if self.index is None else self.index}]"


@dataclass(slots=True, frozen=True, kw_only=True)
class DirectMeterEntry:
    """The direct meter configuration of one table entry."""

    ENTITY_FIELD: ClassVar[str] = "direct_meter_entry"

    table_entry: TableEntry
    config: MeterConfig | None = None

    def encode(self, p4info: P4InfoIndex) -> p4runtime_pb2.DirectMeterEntry:
        """The p4.v1.DirectMeterEntry message."""
        msg = p4runtime_pb2.DirectMeterEntry()
        msg.table_entry.CopyFrom(self.table_entry.encode(p4info))
        if self.config is not None:
            msg.config.CopyFrom(self.config.encode())
        return msg

    @classmethod
    def decode(cls, msg: p4runtime_pb2.DirectMeterEntry, p4info: P4InfoIndex) -> DirectMeterEntry:
        """From a p4.v1.DirectMeterEntry message."""
        return cls(
            table_entry=TableEntry.decode(msg.table_entry, p4info),
            config=MeterConfig.decode(msg.config) if msg.HasField("config") else None,
        )

    def describe(self, p4info: P4InfoIndex | None = None) -> str:
        """Short human summary."""
        return f"direct_meter_entry of {self.table_entry.describe(p4info)}"


@dataclass(slots=True, frozen=True, kw_only=True)
class RegisterEntry:
    """One register cell (index None reads every cell); `value` is the cell's bits as an int."""

    ENTITY_FIELD: ClassVar[str] = "register_entry"

    register: str = ""
    index: int | None = None
    value: Value | None = None

    def encode(self, p4info: P4InfoIndex) -> p4runtime_pb2.RegisterEntry:
        """The p4.v1.RegisterEntry message (value encoded to the register's bit width)."""
        msg = p4runtime_pb2.RegisterEntry()
        if not self.register:
            return msg
        info = p4info.register(self.register)
        msg.register_id = info.id
        if self.index is not None:
            if info.size and not 0 <= self.index < info.size:
                raise EncodeError(
                    f"register {info.name}: index {self.index} outside 0..{info.size - 1}"
                )
            msg.index.index = self.index
        if self.value is not None:
            width = p4info.register_bitwidth(info.id)
            msg.data.bitstring = encode_value(self.value, width, what=f"register {info.name}")
        return msg

    @classmethod
    def decode(cls, msg: p4runtime_pb2.RegisterEntry, p4info: P4InfoIndex) -> RegisterEntry:
        """From a p4.v1.RegisterEntry message (bitstring data decoded to an int)."""
        value: int | None = None
        if msg.HasField("data"):
            value = _p4data_int(msg.data)
        return cls(
            register=p4info.register(msg.register_id).name if msg.register_id else "",
            index=msg.index.index if msg.HasField("index") else None,
            value=value,
        )

    def describe(self, p4info: P4InfoIndex | None = None) -> str:
        """Short human summary."""
        return f"register_entry {self.register or '*'}[{'*' if self.index is None else self.index}]"


def _p4data_int(data: p4data_pb2.P4Data) -> int:
    which = data.WhichOneof("data")
    if which == "bitstring":
        return decode_int(data.bitstring)
    if which == "bool":
        return int(data.bool)
    raise EncodeError(f"register data of kind {which!r} is not a bit string")


@dataclass(slots=True, frozen=True, kw_only=True)
class DigestEntry:
    """Digest delivery configuration (how many per list, how long to wait, ack timeout)."""

    ENTITY_FIELD: ClassVar[str] = "digest_entry"

    digest: str = ""
    max_list_size: int = 1
    max_timeout_ns: int = 0
    ack_timeout_ns: int = 1_000_000_000

    def encode(self, p4info: P4InfoIndex) -> p4runtime_pb2.DigestEntry:
        """The p4.v1.DigestEntry message."""
        msg = p4runtime_pb2.DigestEntry()
        if self.digest:
            msg.digest_id = p4info.digest(self.digest).id
            msg.config.max_list_size = self.max_list_size
            msg.config.max_timeout_ns = self.max_timeout_ns
            msg.config.ack_timeout_ns = self.ack_timeout_ns
        return msg

    @classmethod
    def decode(cls, msg: p4runtime_pb2.DigestEntry, p4info: P4InfoIndex) -> DigestEntry:
        """From a p4.v1.DigestEntry message."""
        return cls(
            digest=p4info.digest(msg.digest_id).name if msg.digest_id else "",
            max_list_size=msg.config.max_list_size,
            max_timeout_ns=msg.config.max_timeout_ns,
            ack_timeout_ns=msg.config.ack_timeout_ns,
        )

    def describe(self, p4info: P4InfoIndex | None = None) -> str:
        """Short human summary."""
        return f"digest_entry {self.digest or '*'}"
