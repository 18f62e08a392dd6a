"""The trained model: a decoder-only transformer as layers with their own parameters and FLOPs.

Every number is a named field with its source; nothing here is fitted to a result.

* **Parameters per layer.** A Llama-style block (Touvron et al. 2023, "Llama 2", section 2 and
  table 1): attention ``4 h^2`` (Q, K, V, O without bias; no grouped-query attention at 13B),
  SwiGLU MLP ``3 h f``, two RMSNorm weights ``2 h``. The input embedding and the output head are
  ``V h`` each (untied in Llama 2).
* **FLOPs per token, forward.** A matrix multiply costs 2 FLOPs per parameter per token; the
  attention score and value products add ``4 s h`` per token per block (Narayanan et al. 2021,
  "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", section
  5.1, eq. 3, written per layer). The embedding is a table look-up (no FLOPs worth counting);
  the head is a ``h x V`` matrix multiply: ``2 h V``.
* **Backward = 2 x forward** (the same paper and Kaplan et al. 2020: the gradients with respect
  to the inputs and to the weights, one matrix multiply each). With full activation
  recomputation (``recompute=True``) the blocks' forward runs once more in the backward pass.
* **Bytes.** BF16 activations and gradients (2 bytes per element), as Megatron trains with
  ``--bf16`` and reduces gradients in the parameters' type by default.

``LLAMA2_13B`` is the default: a 13-billion-parameter model of the size the earlier model of this
simulator used (the study's own model and partitioning are not published with its figures).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True, frozen=True, kw_only=True)
class Layer:
    """One layer of the model: its parameters and its forward FLOPs per token."""

    name: str
    params: float
    fwd_flops_token: float


@dataclass(slots=True, frozen=True, kw_only=True)
class TransformerModel:
    """A decoder-only transformer (every size a parameter; defaults: Llama 2 13B)."""

    name: str = "llama2-13b"
    layers: int = 40  # transformer blocks
    hidden: int = 5120  # h
    ffn_hidden: int = 13824  # f (SwiGLU)
    vocab: int = 32000  # V
    seq: int = 4096  # s: tokens per sample
    act_bytes: int = 2  # BF16 activations
    grad_bytes: int = 2  # BF16 gradients, reduced in the parameters' type
    recompute: bool = False  # full activation recomputation: blocks run forward twice

    def __post_init__(self) -> None:
        for name in ("layers", "hidden", "ffn_hidden", "vocab", "seq", "act_bytes", "grad_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"model.{name}: expected >= 1, got {getattr(self, name)!r}")

    @property
    def block_params(self) -> float:
        """Parameters of one transformer block (attention, SwiGLU MLP, two norms)."""
        h = self.hidden
        return 4.0 * h * h + 3.0 * h * self.ffn_hidden + 2.0 * h

    def layer_list(self) -> list[Layer]:
        """The layers in forward order: embedding, blocks, final norm + head."""
        h, s, v = self.hidden, self.seq, self.vocab
        block = Layer(
            name="block",
            params=self.block_params,
            fwd_flops_token=2.0 * self.block_params + 4.0 * s * h,
        )
        return [
            Layer(name="embedding", params=float(v * h), fwd_flops_token=0.0),
            *([block] * self.layers),
            Layer(name="head", params=float(v * h + h), fwd_flops_token=2.0 * h * v),
        ]

    @property
    def params(self) -> float:
        """All parameters."""
        return sum(x.params for x in self.layer_list())

    def train_flops_sample(self, layer: Layer) -> float:
        """Forward + backward FLOPs of ``layer`` for one sample (``seq`` tokens)."""
        again = 1.0 if self.recompute and layer.name == "block" else 0.0
        return (3.0 + again) * layer.fwd_flops_token * self.seq

    def activation_bytes(self, micro_batch: int) -> int:
        """The activations one micro-batch sends between pipeline stages (``b s h``)."""
        return micro_batch * self.seq * self.hidden * self.act_bytes


LLAMA2_13B = TransformerModel()
