"""Models whose start-up memory profile kvpure does not estimate, refused in one line.

Linear-attention hybrids (gated delta net layers: Qwen3-Next, Qwen3.5/3.6;
KDA layers: Kimi-Linear) are planned for their KV cache and recurrent state,
but their memory profile is not estimated. Their weights are counted from
config.json (:mod:`kvpure.memory_profile.gdn_layers`, equal to vLLM 0.34's own
allocation to the byte: tests/test_memory_weights_034.py), but the profiling
run's peak of these layers (chunked delta-rule kernels) was never fitted: no
start-up of these families is among the bundled logs (tests/data/memory_logs).
Rather than claim a band it cannot back, the estimate is refused;
``--kv-cache-memory`` with the figure vLLM logs plans them exactly.
"""

from __future__ import annotations

from kvpure.errors import InvalidFieldError, KVPureError
from kvpure.models.config import HFConfig
from kvpure.models.families import model_layout
from kvpure.models.layout import GatedDeltaNetLayer, KDALayer

__all__ = ["UnmodelledMemoryError", "refuse_unmodelled_memory"]


class UnmodelledMemoryError(InvalidFieldError):
    """A model whose memory profile kvpure does not estimate (one line, naming the fix)."""

    def __init__(self, *, architecture: str, layers: str) -> None:
        super().__init__(
            field="model",
            value=architecture,
            reason=f"its {layers} layers' profiling peak is not in kvpure's "
            "memory profile, so the KV memory vLLM leaves is not estimated; pass "
            "--kv-cache-memory with the 'Available KV cache memory' vLLM logged",
        )

    def __str__(self) -> str:
        return f"{self.field} {self.value}: {self.reason}"


def refuse_unmodelled_memory(config: HFConfig) -> None:
    """Raise :class:`UnmodelledMemoryError` for a linear-attention hybrid; else nothing."""
    try:
        layout = model_layout(config)
    except KVPureError:
        return  # an architecture kvpure cannot plan is refused where it is planned
    kinds = sorted(
        {
            "gated delta net" if isinstance(layer, GatedDeltaNetLayer) else "KDA"
            for layer in layout.layers
            if isinstance(layer, GatedDeltaNetLayer | KDALayer)
        }
    )
    if kinds:
        raise UnmodelledMemoryError(architecture=layout.architecture, layers=" and ".join(kinds))
