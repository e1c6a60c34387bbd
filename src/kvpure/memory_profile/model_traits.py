"""Family facts about a language model's config.json that shape what vLLM 0.26 allocates.

Which layers are MoE or Mamba, whether the LM head is tied, which parameters vLLM keeps
in float32 whatever the model dtype, and whether vLLM builds its own rotary layers.
"""

from __future__ import annotations

from typing import Final

from kvpure.errors import InvalidFieldError
from kvpure.models.config import HFConfig

__all__ = [
    "GDN_FAMILIES",
    "model_family",
    "final_norm",
    "float32_params",
    "is_moe_layer",
    "layer_kinds",
    "layer_norms",
    "nemotron_h_kinds",
    "num_experts",
    "routing_bias",
    "tied_embeddings",
    "uses_vllm_rotary",
]


_TRANSFORMERS_BACKEND: Final = frozenset({"olmo", "olmo2"})
"""Families vLLM 0.26 runs through its Transformers modeling backend (registry.py maps
``Olmo2ForCausalLM`` to ``TransformersForCausalLM``): Hugging Face's own rotary, which
registers no cos/sin cache."""


def model_family(cfg: HFConfig) -> str:
    """``model_type``, ``""`` when the config names none (no family matches it)."""
    return cfg.str_("model_type", "")


def uses_vllm_rotary(cfg: HFConfig) -> bool:
    """Whether vLLM builds the language model ``cfg`` with its own rotary layers."""
    return model_family(cfg) not in _TRANSFORMERS_BACKEND


def num_experts(cfg: HFConfig) -> int:
    """Routed experts per MoE layer (0 for a dense model)."""
    for key in ("n_routed_experts", "num_local_experts", "num_experts"):
        if cfg.has(key):
            return cfg.int_(key, minimum=0)
    return 0


def is_moe_layer(cfg: HFConfig, index: int) -> bool:
    """Whether decoder layer ``index`` has routed experts."""
    if num_experts(cfg) == 0:
        return False
    if index < cfg.int_("first_k_dense_replace", 0):
        return False
    if cfg.has("mlp_only_layers") and index in cfg.int_list("mlp_only_layers"):
        return False
    step = cfg.int_("decoder_sparse_step", 1, minimum=1)
    return (index + 1) % step == 0


def dense_mlp_width(cfg: HFConfig) -> int:
    """The widest MLP a forward pass of ``cfg`` runs densely (the activation's forward term).

    A dense model's ``intermediate_size``; a MoE model's dense layers (DeepSeek's
    ``first_k_dense_replace``, Qwen's ``mlp_only_layers``, a ``decoder_sparse_step`` above 1;
    Llama-4's ``intermediate_size_mlp``) or else its shared experts, as
    ``checkpoint_layers`` lays them out; 0 when every layer routes all its MLP work
    (Qwen3-MoE, Mixtral, gpt-oss: no dense MLP ever runs).
    """
    inter = cfg.int_("intermediate_size", 0)
    if num_experts(cfg) == 0:
        return inter
    layers = cfg.int_("num_hidden_layers", minimum=1)
    if not all(is_moe_layer(cfg, i) for i in range(layers)):
        return cfg.int_("intermediate_size_mlp", inter)
    expert = cfg.int_("moe_intermediate_size", inter)
    shared = cfg.int_("n_shared_experts", cfg.int_("num_shared_experts", 0)) * expert
    if model_family(cfg) == "llama4_text":
        shared = expert  # one shared expert of the routed experts' size
    for key in ("shared_intermediate_size", "shared_expert_intermediate_size"):
        if cfg.has(key):
            shared = cfg.int_(key)
    return shared


GDN_FAMILIES: Final = frozenset({"qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"})
"""Language models whose ``linear_attention`` layers are gated delta nets (qwen3_next.py,
qwen3_5.py): :func:`layer_kinds` calls them ``"gdn"``."""


def _gdn_kinds(cfg: HFConfig, layers: int) -> tuple[str, ...]:
    """``layer_types``, else every ``full_attention_interval``-th layer (4) full attention
    (transformers' ``Qwen3NextConfig`` fills it so)."""
    if cfg.has("layer_types"):
        kinds = cfg.str_list("layer_types")
    else:
        interval = cfg.int_("full_attention_interval", 4, minimum=1)
        kinds = tuple(
            "linear_attention" if (i + 1) % interval else "full_attention" for i in range(layers)
        )
    if len(kinds) != layers or any(k not in ("linear_attention", "full_attention") for k in kinds):
        raise InvalidFieldError(
            field="config.json layer_types",
            value=str(kinds)[:80],
            reason=f"must give 'linear_attention' or 'full_attention' for each of the {layers} "
            "layers",
        )
    return tuple("gdn" if k == "linear_attention" else "attention" for k in kinds)


_PATTERN_KINDS: Final = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}


def nemotron_h_kinds(cfg: HFConfig, layers: int) -> tuple[str, ...]:
    """Each layer's mixer from Nemotron-H's ``hybrid_override_pattern``."""
    pattern = cfg.str_("hybrid_override_pattern", "")
    if len(pattern) != layers or any(c not in _PATTERN_KINDS for c in pattern):
        raise InvalidFieldError(
            field="config.json hybrid_override_pattern",
            value=pattern[:80],
            reason=f"must give one of M, *, -, E for each of the {layers} layers",
        )
    return tuple(_PATTERN_KINDS[c] for c in pattern)


def layer_kinds(cfg: HFConfig, layers: int) -> tuple[str, ...]:
    """Each decoder layer's mixer: ``"attention"`` or ``"mamba"`` (Nemotron-H: also
    ``"mlp"`` and ``"moe"``, layers without a token mixer; Qwen3-Next / Qwen3.5:
    ``"gdn"``, a gated delta net)."""
    family = model_family(cfg)
    if family in GDN_FAMILIES:
        return _gdn_kinds(cfg, layers)
    if family == "kimi_linear":  # kda_layers counts from 1
        kda = set(cfg.sub("linear_attn_config").int_list("kda_layers"))
        return tuple("kda" if i + 1 in kda else "attention" for i in range(layers))
    if family == "nemotron_h":
        return nemotron_h_kinds(cfg, layers)
    if family == "jamba":  # transformers' JambaConfig.layers_block_type
        period = cfg.int_("attn_layer_period", 8, minimum=1)
        offset = cfg.int_("attn_layer_offset", 4)
        return tuple("attention" if i % period == offset else "mamba" for i in range(layers))
    if cfg.has("layer_types"):
        kinds = cfg.str_list("layer_types")
        if len(kinds) != layers:
            raise InvalidFieldError(
                field="config.json layer_types",
                value=len(kinds),
                reason=f"must list one type per layer ({layers})",
            )
        return tuple("mamba" if "mamba" in k else "attention" for k in kinds)
    return ("attention",) * layers


_ALWAYS_TIED: Final = frozenset({"cohere", "cohere2"})
"""Families whose vLLM model file always reuses the embedding as the LM head (commandr.py:
``CohereForCausalLM`` has no ``lm_head``; its logits use ``model.embed_tokens``)."""


def tied_embeddings(cfg: HFConfig) -> bool:
    """Whether vLLM reuses the embedding as the LM head (no ``lm_head`` of its own)."""
    family = model_family(cfg)
    if family in _ALWAYS_TIED:
        return True
    return cfg.bool_("tie_word_embeddings", family.startswith("gemma"))


def float32_params(cfg: HFConfig) -> frozenset[str]:
    """``module.param`` (or bare ``param``) names vLLM 0.26 allocates in float32 whatever
    the model dtype.

    - the router's ``e_score_correction_bias`` (deepseek_v2.py with ``topk_method:
      noaux_tc``, glm4_moe.py; minimax_m2.py with ``use_routing_bias``): one float32 per
      routed expert;
    - the Mamba mixers' ``A`` (``A_log`` in the checkpoint), one per head (Mamba2) or per
      channel and state (Mamba);
    - GLM-4.5's and MiniMax-M2's router ``gate.weight`` (an ``nn.Linear`` / ``GateLinear``
      built with ``dtype=torch.float32``);
    - DeepSeek-V3.2's indexer ``k_norm`` weight and bias (a float32 LayerNorm);
    - the Transformers backend's (OLMo-1 and -2) Hugging Face rotary buffers.
    """
    family = model_family(cfg)
    out: set[str] = {"A_log"}  # Mamba mixers' A (mamba_mixer.py, mamba_mixer2.py)
    if family in ("glm4_moe", "minimax_m2"):
        out.add("gate.weight")
    if family == "kimi_linear":  # KDA's convolutions, dt_bias and A_log
        out |= {"q_conv1d.weight", "k_conv1d.weight", "v_conv1d.weight", "dt_bias"}
    if cfg.has("index_topk"):  # DeepSeek-V3.2's indexer LayerNorm (deepseek_v2.py)
        out |= {"k_norm.weight", "k_norm.bias"}
    if _routing_bias(cfg):
        out.add("gate.e_score_correction_bias")
    if not uses_vllm_rotary(cfg):  # Hugging Face's rotary (its inv_freq buffers)
        out |= {"rotary_emb.inv_freq", "rotary_emb.original_inv_freq"}
    return frozenset(out)


def _routing_bias(cfg: HFConfig) -> bool:
    family = model_family(cfg)
    if family == "glm4_moe":
        return True
    if family == "minimax_m2":
        return cfg.bool_("use_routing_bias", False)
    if family == "kimi_linear":  # kimi_linear.py: a sigmoid router with its bias
        return cfg.str_("moe_router_activation_func", "sigmoid") == "sigmoid"
    return cfg.str_("topk_method", "") == "noaux_tc"


def routing_bias(cfg: HFConfig) -> bool:
    """Whether each MoE layer's router has an ``e_score_correction_bias`` (one per expert)."""
    return num_experts(cfg) > 0 and _routing_bias(cfg)


_WEIGHTLESS_NORMS: Final = frozenset({"olmo"})
"""Families whose LayerNorms hold no weight nor bias (transformers' ``OlmoLayerNorm``,
"LayerNorm but with no learnable weight or bias", which vLLM 0.26's Transformers backend
builds for OLMo-1): neither the decoder layers' norms nor the final one."""


def final_norm(cfg: HFConfig) -> bool:
    """Whether the language model ends with a weighted norm (``model.norm.weight``)."""
    return model_family(cfg) not in _WEIGHTLESS_NORMS


_LAYER_NORMS: Final = {
    "gemma2": ("pre_feedforward_layernorm", "post_feedforward_layernorm"),
    "gemma3": ("pre_feedforward_layernorm", "post_feedforward_layernorm"),
    "gemma3_text": ("pre_feedforward_layernorm", "post_feedforward_layernorm"),
    "glm4": ("post_self_attn_layernorm", "post_mlp_layernorm"),
}
"""Norms a decoder layer has besides ``input_layernorm`` and ``post_attention_layernorm``
(gemma2.py, gemma3.py: around the MLP too; glm4.py: after attention and after the MLP)."""


def layer_norms(cfg: HFConfig) -> tuple[str, ...]:
    """The hidden-size norms of one decoder layer (one weight each, no bias)."""
    family = model_family(cfg)
    if family in _WEIGHTLESS_NORMS:
        return ()
    if family in ("cohere", "cohere2"):
        return ("input_layernorm",)  # commandr.py: attention and MLP in parallel, one norm
    if family in ("olmo2", "olmo3"):  # olmo3.py: both norms after their block
        return ("post_attention_layernorm", "post_feedforward_layernorm")
    return ("input_layernorm", "post_attention_layernorm", *_LAYER_NORMS.get(family, ()))
