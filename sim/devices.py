"""Accelerator types for the heterogeneous-training model: a shipped table of plausible values.

Every number is a parameter (``Device`` is a plain dataclass; pass your own table). The defaults
are public peak dense BF16/FP16 figures rounded, times one model-FLOPs utilisation (MFU) for all,
so the *ratios* between vendors carry the model; none of them is a measurement of ours.

| key | vendor | peak TFLOPS (dense 16-bit) | MFU |
|---|---|---|---|
| H100 | nvidia | 989 | 0.40 |
| A100 | nvidia | 312 | 0.40 |
| BR104 | biren | 256 | 0.40 |
| BR100 | biren | 512 | 0.40 |
| 910B | huawei | 320 | 0.40 |
| MLU370 | cambricon | 96 | 0.40 |
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(slots=True, frozen=True, kw_only=True)
class Device:
    """One accelerator type."""

    name: str
    vendor: str
    peak_tflops: float  # dense 16-bit
    mfu: float = 0.40  # the fraction of peak a training step achieves

    @property
    def flops(self) -> float:
        """Effective FLOP/s in training."""
        return self.peak_tflops * 1e12 * self.mfu


DEVICES: Mapping[str, Device] = MappingProxyType(
    {
        d.name: d
        for d in (
            Device(name="H100", vendor="nvidia", peak_tflops=989.0),
            Device(name="A100", vendor="nvidia", peak_tflops=312.0),
            Device(name="BR104", vendor="biren", peak_tflops=256.0),
            Device(name="BR100", vendor="biren", peak_tflops=512.0),
            Device(name="910B", vendor="huawei", peak_tflops=320.0),
            Device(name="MLU370", vendor="cambricon", peak_tflops=96.0),
        )
    }
)


def device(name: str, table: Mapping[str, Device] | None = None) -> Device:
    """The device ``name`` from ``table`` (the shipped one by default)."""
    t = DEVICES if table is None else table
    try:
        return t[name]
    except KeyError:
        raise ValueError(
            f"device: unknown accelerator {name!r}; expected one of {', '.join(t)}"
        ) from None
