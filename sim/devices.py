"""Accelerator types for the heterogeneous-training model: a shipped table of public figures.

Every number is a parameter (``Device`` is a plain dataclass; pass your own table). The defaults
are the vendors' published peak dense BF16/FP16 figures (as reported; not verified by us) times one model-FLOPs utilisation (MFU)
for all, so the *ratios* between vendors carry the model; none of them is a measurement of ours,
and none was chosen to match a result.

| key | vendor | peak TFLOPS (dense 16-bit) | source |
|---|---|---|---|
| H100 | nvidia | 989 | NVIDIA H100 SXM datasheet (BF16 dense; 1,979 with sparsity) |
| A100 | nvidia | 312 | NVIDIA A100 datasheet (BF16 dense; 624 with sparsity) |
| BR104 | biren | 256 | Biren BR104 product brief, BF16 as reported (half a BR100) |
| BR100 | biren | 512 | Biren BR100 launch (Hot Chips 34, 2022), 16-bit figure as reported |
| BIV100 | iluvatar | 147 | Iluvatar CoreX Tiangai 100 (BI-V100) product page: 147 TFLOPS FP16 |
| 910B | huawei | 320 | Ascend 910 (Hot Chips 31, 2019): 256 TFLOPS FP16; 910B as commonly reported: 320 |
| MLU370 | cambricon | 96 | Cambricon MLU370-X8 datasheet: 96 TFLOPS FP16 per card (two dies) |

MFU 0.40 for every device: of the order large dense-transformer training reaches on A100s
(Narayanan et al. 2021, Megatron-LM at 1T parameters: 52 % of peak; Chowdhery et al. 2022,
PaLM: 46.2 % MFU; 35-45 % is common in practice). One value for all vendors is an assumption:
per-vendor MFUs of mature stacks are not published, and a lower MFU on one vendor changes only
that vendor's speed, which the min-max split below adapts to.
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
            Device(name="BIV100", vendor="iluvatar", peak_tflops=147.0),
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
