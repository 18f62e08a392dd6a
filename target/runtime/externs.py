"""v1model stateful externs: registers, counters, meters (direct and indirect)."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from icefabric.target.runtime.clock import Clock
from icefabric.target.runtime.errors import InvalidArgumentError, OutOfRangeError

GREEN = 0
YELLOW = 1
RED = 2

COUNTER_KINDS = ("packets", "bytes", "packets_and_bytes")
METER_KINDS = ("packets", "bytes")


class Register:
    """A register array of `size` cells of `bitwidth` bits, all initially 0."""

    def __init__(self, name: str, size: int, bitwidth: int) -> None:
        if size < 0 or bitwidth <= 0:
            raise ValueError(f"register {name}: bad size {size} / bitwidth {bitwidth}")
        self.name = name
        self.size = size
        self.bitwidth = bitwidth
        self._mask = (1 << bitwidth) - 1
        self.values = [0] * size
        self.out_of_range = 0  # data-plane accesses outside the array (BMv2 logs an error)

    def read(self, index: int) -> int:
        """Data-plane read; an out-of-range index reads 0."""
        if 0 <= index < self.size:
            return self.values[index]
        self.out_of_range += 1
        return 0

    def write(self, index: int, value: int) -> None:
        """Data-plane write; an out-of-range index is ignored."""
        if 0 <= index < self.size:
            self.values[index] = value & self._mask
        else:
            self.out_of_range += 1

    def cp_read(self, index: int) -> int:
        """Control-plane read; raises OutOfRangeError for a bad index."""
        self._check(index)
        return self.values[index]

    def cp_write(self, index: int, value: int) -> None:
        """Control-plane write; raises for a bad index or a value wider than the cell."""
        self._check(index)
        if value < 0 or value > self._mask:
            raise InvalidArgumentError(
                f"register {self.name}: value {value:#x} does not fit in {self.bitwidth} bits"
            )
        self.values[index] = value

    def reset(self) -> None:
        """Set every cell to 0."""
        self.values = [0] * self.size

    def _check(self, index: int) -> None:
        if not 0 <= index < self.size:
            raise OutOfRangeError(f"register {self.name}: index {index} not in [0, {self.size})")


class Counter:
    """An indexed counter array; each cell holds (bytes, packets)."""

    def __init__(self, name: str, size: int, kind: str) -> None:
        if kind not in COUNTER_KINDS:
            raise ValueError(f"counter {name}: kind {kind!r} not in {COUNTER_KINDS}")
        self.name = name
        self.size = size
        self.kind = kind
        self.bytes = [0] * size
        self.packets = [0] * size
        self.out_of_range = 0

    def count(self, index: int, packet_length: int) -> None:
        """Count one packet of `packet_length` bytes in cell `index` (bad index ignored)."""
        if 0 <= index < self.size:
            self.bytes[index] += packet_length
            self.packets[index] += 1
        else:
            self.out_of_range += 1

    def read(self, index: int) -> tuple[int, int]:
        """Return (bytes, packets) of a cell; raises OutOfRangeError for a bad index."""
        self._check(index)
        return self.bytes[index], self.packets[index]

    def write(self, index: int, byte_count: int, packet_count: int) -> None:
        """Set a cell (control plane)."""
        self._check(index)
        self.bytes[index] = byte_count
        self.packets[index] = packet_count

    def reset(self) -> None:
        """Zero every cell."""
        self.bytes = [0] * self.size
        self.packets = [0] * self.size

    def _check(self, index: int) -> None:
        if not 0 <= index < self.size:
            raise OutOfRangeError(f"counter {self.name}: index {index} not in [0, {self.size})")


class DirectCounter:
    """A counter attached to a table: the data lives in the table's entries."""

    def __init__(self, name: str, kind: str, table: str) -> None:
        if kind not in COUNTER_KINDS:
            raise ValueError(f"direct_counter {name}: kind {kind!r} not in {COUNTER_KINDS}")
        self.name = name
        self.kind = kind
        self.table = table


@dataclass(frozen=True, slots=True)
class MeterConfig:
    """trTCM parameters as P4Runtime MeterConfig: rates per second, bursts in units."""

    cir: int
    cburst: int
    pir: int
    pburst: int


class MeterState:
    """One two-rate three-colour marker (RFC 2698, colour-blind), as BMv2's Meter."""

    __slots__ = ("_last_us", "_tc", "_tp", "config")

    def __init__(self, config: MeterConfig | None = None, now_us: int = 0) -> None:
        self.config: MeterConfig | None = None
        self._tc = 0.0
        self._tp = 0.0
        self._last_us = 0
        if config is not None:
            self.configure(config, now_us)

    def configure(self, config: MeterConfig | None, now_us: int = 0) -> None:
        """Set (or clear with None) the rates; buckets start full, as in BMv2."""
        if config is not None and (config.cir > config.pir and config.pir >= 0):
            # BMv2 requires rates sorted; PI reports INVALID_ARGUMENT for cir > pir.
            raise InvalidArgumentError(f"meter config: cir {config.cir} > pir {config.pir}")
        self.config = config
        if config is not None:
            self._tc = float(config.cburst)
            self._tp = float(config.pburst)
            self._last_us = now_us

    def execute(self, amount: int, now_us: int) -> int:
        """Colour `amount` units (1 packet or N bytes) arriving at `now_us`."""
        cfg = self.config
        if cfg is None:
            return GREEN
        dt = now_us - self._last_us
        if dt > 0:
            self._last_us = now_us
            self._tc = min(float(cfg.cburst), self._tc + dt * cfg.cir / 1e6)
            self._tp = min(float(cfg.pburst), self._tp + dt * cfg.pir / 1e6)
        if self._tp < amount:
            return RED
        if self._tc < amount:
            self._tp -= amount
            return YELLOW
        self._tp -= amount
        self._tc -= amount
        return GREEN


class Meter:
    """An indexed meter array (trTCM per cell); unconfigured cells colour every packet GREEN."""

    def __init__(self, name: str, size: int, kind: str, *, clock: Clock | None = None) -> None:
        if kind not in METER_KINDS:
            raise ValueError(f"meter {name}: kind {kind!r} not in {METER_KINDS}")
        self.name = name
        self.size = size
        self.kind = kind
        self.clock = clock or Clock()
        self._cells: dict[int, MeterState] = {}
        self._lock = threading.Lock()
        self.out_of_range = 0

    def execute(self, index: int, packet_length: int) -> int:
        """Colour one packet in cell `index` (0 green, 1 yellow, 2 red)."""
        cell = self._cells.get(index)
        if cell is None:
            if not 0 <= index < self.size:
                self.out_of_range += 1
            return GREEN
        amount = packet_length if self.kind == "bytes" else 1
        return cell.execute(amount, self.clock.now_us())

    def set_config(self, index: int, config: MeterConfig | None) -> None:
        """Configure one cell (None resets it to unconfigured)."""
        if not 0 <= index < self.size:
            raise OutOfRangeError(f"meter {self.name}: index {index} not in [0, {self.size})")
        with self._lock:
            if config is None:
                self._cells.pop(index, None)
            else:
                state = MeterState()
                state.configure(config, self.clock.now_us())
                self._cells[index] = state

    def get_config(self, index: int) -> MeterConfig | None:
        """Return a cell's configuration (None when unconfigured)."""
        if not 0 <= index < self.size:
            raise OutOfRangeError(f"meter {self.name}: index {index} not in [0, {self.size})")
        cell = self._cells.get(index)
        return cell.config if cell else None

    def reset(self) -> None:
        """Unconfigure every cell."""
        self._cells.clear()


class DirectMeter:
    """A meter attached to a table: per-entry state lives in the table's entries."""

    def __init__(self, name: str, kind: str, table: str, *, clock: Clock | None = None) -> None:
        if kind not in METER_KINDS:
            raise ValueError(f"direct_meter {name}: kind {kind!r} not in {METER_KINDS}")
        self.name = name
        self.kind = kind
        self.table = table
        self.clock = clock or Clock()
