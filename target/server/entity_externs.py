"""Register, counter, meter, direct counter/meter and digest entries."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
from p4.v1 import p4data_pb2, p4runtime_pb2

from icefabric.target.runtime import MeterConfig, MeterState
from icefabric.target.server.bytestrings import decode, encode
from icefabric.target.server.entity_tables import encode_entry, find_entry
from icefabric.target.server.errors import P4RTError, invalid, not_found, out_of_range
from icefabric.target.server.state import PipelineState

Update = p4runtime_pb2.Update


def _modify_only(update_type: int, what: str) -> None:
    if update_type != Update.MODIFY:
        raise invalid(f"{what}: only MODIFY is allowed")


def _indices(size: int, index: p4runtime_pb2.Index, has_index: bool, what: str) -> range:
    if not has_index:
        return range(size)
    if not 0 <= index.index < size:
        raise out_of_range(f"{what}: index {index.index} not in [0, {size})")
    return range(index.index, index.index + 1)


_WHAT = {"registers": "register", "counters": "counter", "meters": "meter"}


def _read_cells(
    state: PipelineState, kind: str, wanted_id: int, index: p4runtime_pb2.Index, has_index: bool
) -> Iterator[tuple[int, Any, int]]:
    """(P4Info id, run-time object, cell index) of every cell a (wildcard) read selects."""
    ids = [wanted_id] if wanted_id else list(getattr(state.index, kind))
    for oid in ids:
        name = state.index.get(kind, oid).preamble.name
        obj = state.runtime(kind, name)
        for i in _indices(obj.size, index, has_index, f"{_WHAT[kind]} {name}"):
            yield oid, obj, i


# --- registers -----------------------------------------------------------------------------
def write_register(state: PipelineState, update_type: int, e: p4runtime_pb2.RegisterEntry) -> None:
    """MODIFY one register cell (all cells when the index is unset)."""
    spec = state.index.get("registers", e.register_id)
    name = spec.preamble.name
    _modify_only(update_type, f"register {name}")
    reg = state.runtime("registers", name)
    if e.data.WhichOneof("data") != "bitstring":
        raise invalid(f"register {name}: data must be a bitstring")
    width = spec.type_spec.bitstring.bit.bitwidth or reg.bitwidth
    value = decode(e.data.bitstring, width, f"register {name}")
    for i in _indices(reg.size, e.index, e.HasField("index"), f"register {name}"):
        reg.cp_write(i, value)


def read_registers(
    state: PipelineState, e: p4runtime_pb2.RegisterEntry
) -> Iterator[p4runtime_pb2.RegisterEntry]:
    """Register cells matching a (wildcard) read."""
    for rid, reg, i in _read_cells(state, "registers", e.register_id, e.index, e.HasField("index")):
        yield p4runtime_pb2.RegisterEntry(
            register_id=rid,
            index=p4runtime_pb2.Index(index=i),
            data=p4data_pb2.P4Data(bitstring=encode(reg.values[i])),
        )


# --- counters ------------------------------------------------------------------------------
def write_counter(state: PipelineState, update_type: int, e: p4runtime_pb2.CounterEntry) -> None:
    """MODIFY counter cells."""
    spec = state.index.get("counters", e.counter_id)
    name = spec.preamble.name
    _modify_only(update_type, f"counter {name}")
    ctr = state.runtime("counters", name)
    for i in _indices(ctr.size, e.index, e.HasField("index"), f"counter {name}"):
        ctr.write(i, e.data.byte_count, e.data.packet_count)


def read_counters(
    state: PipelineState, e: p4runtime_pb2.CounterEntry
) -> Iterator[p4runtime_pb2.CounterEntry]:
    """Counter cells matching a (wildcard) read."""
    for cid, ctr, i in _read_cells(state, "counters", e.counter_id, e.index, e.HasField("index")):
        out = p4runtime_pb2.CounterEntry(counter_id=cid, index=p4runtime_pb2.Index(index=i))
        out.data.byte_count = ctr.bytes[i]
        out.data.packet_count = ctr.packets[i]
        yield out


# --- meters --------------------------------------------------------------------------------
def _config(e: p4runtime_pb2.MeterEntry | p4runtime_pb2.DirectMeterEntry) -> MeterConfig | None:
    if not e.HasField("config"):
        return None
    c = e.config
    return MeterConfig(c.cir, c.cburst, c.pir, c.pburst)


def _config_proto(cfg: MeterConfig) -> p4runtime_pb2.MeterConfig:
    return p4runtime_pb2.MeterConfig(cir=cfg.cir, cburst=cfg.cburst, pir=cfg.pir, pburst=cfg.pburst)


def write_meter(state: PipelineState, update_type: int, e: p4runtime_pb2.MeterEntry) -> None:
    """MODIFY meter cells (unset config = back to unconfigured)."""
    spec = state.index.get("meters", e.meter_id)
    name = spec.preamble.name
    _modify_only(update_type, f"meter {name}")
    meter = state.runtime("meters", name)
    cfg = _config(e)
    for i in _indices(meter.size, e.index, e.HasField("index"), f"meter {name}"):
        meter.set_config(i, cfg)


def read_meters(
    state: PipelineState, e: p4runtime_pb2.MeterEntry
) -> Iterator[p4runtime_pb2.MeterEntry]:
    """Meter cells matching a (wildcard) read."""
    for mid, meter, i in _read_cells(state, "meters", e.meter_id, e.index, e.HasField("index")):
        out = p4runtime_pb2.MeterEntry(meter_id=mid, index=p4runtime_pb2.Index(index=i))
        cfg = meter.get_config(i)
        if cfg is not None:
            out.config.CopyFrom(_config_proto(cfg))
        yield out


# --- direct resources ----------------------------------------------------------------------
def _direct_entries(
    state: PipelineState, te: p4runtime_pb2.TableEntry, kind: str
) -> list[tuple[Any, Any, Any]]:
    """(table info, table, entry) a direct counter/meter read selects: one entry when the match
    is given, else every entry of the table (or of every table) that has such a resource."""
    by_table = (
        state.index.direct_counter_by_table
        if kind == "counter"
        else state.index.direct_meter_by_table
    )
    if te.table_id and te.match:
        info, table, entry = find_entry(state, te)
        if info.id not in by_table:
            raise invalid(f"table {info.name} has no direct {kind}")
        return [(info, table, entry)]
    out: list[tuple[Any, Any, Any]] = []
    for tid in by_table:
        if te.table_id and tid != te.table_id:
            continue
        info = state.index.table(tid)
        table = state.runtime("tables", info.name)
        out += [(info, table, en) for en in table.entries()]
    return out


def write_direct_counter(
    state: PipelineState, update_type: int, e: p4runtime_pb2.DirectCounterEntry
) -> None:
    """Set the direct counter of one table entry."""
    _modify_only(update_type, "direct counter")
    info, table, entry = find_entry(state, e.table_entry)
    if table.direct_counter is None:
        raise invalid(f"table {info.name} has no direct counter")
    entry.byte_count = e.data.byte_count
    entry.packet_count = e.data.packet_count


def read_direct_counters(
    state: PipelineState, e: p4runtime_pb2.DirectCounterEntry
) -> Iterator[p4runtime_pb2.DirectCounterEntry]:
    """Direct counters of one entry, or of every entry of a table (or all tables)."""
    for info, table, entry in _direct_entries(state, e.table_entry, "counter"):
        out = p4runtime_pb2.DirectCounterEntry()
        out.table_entry.CopyFrom(encode_entry(state, info, table, entry, with_counters=False))
        out.data.byte_count = entry.byte_count
        out.data.packet_count = entry.packet_count
        yield out


def write_direct_meter(
    state: PipelineState, update_type: int, e: p4runtime_pb2.DirectMeterEntry
) -> None:
    """Configure the direct meter of one table entry."""
    _modify_only(update_type, "direct meter")
    info, table, entry = find_entry(state, e.table_entry)
    if table.direct_meter is None:
        raise invalid(f"table {info.name} has no direct meter")
    cfg = _config(e)
    entry.meter_config = cfg
    entry.meter_state = MeterState(cfg, table.direct_meter.clock.now_us())


def read_direct_meters(
    state: PipelineState, e: p4runtime_pb2.DirectMeterEntry
) -> Iterator[p4runtime_pb2.DirectMeterEntry]:
    """Direct meter configs of one entry or of every entry of a table (or all tables)."""
    for info, table, entry in _direct_entries(state, e.table_entry, "meter"):
        out = p4runtime_pb2.DirectMeterEntry()
        out.table_entry.CopyFrom(encode_entry(state, info, table, entry, with_counters=False))
        out.table_entry.ClearField("meter_config")
        if entry.meter_config is not None:
            out.config.CopyFrom(_config_proto(entry.meter_config))
        yield out


# --- digests -------------------------------------------------------------------------------
def write_digest(state: PipelineState, update_type: int, e: p4runtime_pb2.DigestEntry) -> None:
    """INSERT / MODIFY / DELETE a digest's streaming configuration."""
    spec = state.index.get("digests", e.digest_id)
    name = spec.preamble.name
    exists = e.digest_id in state.digest_configs
    if update_type == Update.INSERT:
        if exists:
            raise P4RTError(grpc.StatusCode.ALREADY_EXISTS, f"digest {name} is already configured")
        state.digest_configs[e.digest_id] = e.config
    elif update_type == Update.MODIFY:
        if not exists:
            raise not_found(f"digest {name} is not configured")
        state.digest_configs[e.digest_id] = e.config
    elif update_type == Update.DELETE:
        if not exists:
            raise not_found(f"digest {name} is not configured")
        del state.digest_configs[e.digest_id]
    else:
        raise invalid(f"digest {name}: unknown update type {update_type}")


def read_digests(
    state: PipelineState, e: p4runtime_pb2.DigestEntry
) -> Iterator[p4runtime_pb2.DigestEntry]:
    """Configured digests (digest_id 0 = all)."""
    for did, cfg in sorted(state.digest_configs.items()):
        if not e.digest_id or e.digest_id == did:
            out = p4runtime_pb2.DigestEntry(digest_id=did)
            out.config.CopyFrom(cfg)
            yield out
