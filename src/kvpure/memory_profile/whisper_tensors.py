"""Whisper's tensors from config.json, as vLLM 0.26's whisper.py builds the model.

An audio encoder and a text decoder, ``d_model`` wide, every linear layer with a bias:

- encoder: two ``Conv1d`` (``num_mel_bins -> d``, ``d -> d``, kernel 3), a sinusoidal
  ``embed_positions`` table (``max_source_positions x d``), ``encoder_layers`` layers of
  self-attention (``qkv_proj`` ``3d x d``, ``out_proj``), two LayerNorms (weight and
  bias) and the ``fc1``/``fc2`` MLP (``encoder_ffn_dim``), then a LayerNorm;
- decoder: ``embed_tokens`` (a plain ``nn.Embedding``: the vocabulary is neither padded
  nor split over TP) and learned ``embed_positions`` (``max_target_positions x d``),
  ``decoder_layers`` layers of self-attention, cross-attention (``q_proj``, ``kv_proj``
  ``2d x d``, ``out_proj``), three LayerNorms and the MLP, then a LayerNorm; the LM head
  (``proj_out``) is tied to ``embed_tokens``.
"""

from __future__ import annotations

from kvpure.memory_profile.checkpoint_layers import linear, vec
from kvpure.memory_profile.safetensors_header import TensorInfo
from kvpure.models.config import HFConfig

__all__ = ["whisper_tensors"]


def _dense(p: str, out: int, inp: int, quant: str, dt: str) -> list[TensorInfo]:
    return [*linear(p, out, inp, quant, dt), vec(f"{p}.bias", out, dt)]


def _norm(p: str, d: int, dt: str) -> list[TensorInfo]:
    return [vec(f"{p}.weight", d, dt), vec(f"{p}.bias", d, dt)]


def _layer(p: str, d: int, ffn: int, quant: str, dt: str, *, cross: bool) -> list[TensorInfo]:
    out = _dense(f"{p}.self_attn.qkv_proj", 3 * d, d, quant, dt)
    out += _dense(f"{p}.self_attn.out_proj", d, d, quant, dt)
    out += _norm(f"{p}.self_attn_layer_norm", d, dt)
    if cross:
        out += _dense(f"{p}.encoder_attn.q_proj", d, d, quant, dt)
        out += _dense(f"{p}.encoder_attn.kv_proj", 2 * d, d, quant, dt)
        out += _dense(f"{p}.encoder_attn.out_proj", d, d, quant, dt)
        out += _norm(f"{p}.encoder_attn_layer_norm", d, dt)
    out += _dense(f"{p}.fc1", ffn, d, quant, dt)
    out += _dense(f"{p}.fc2", d, ffn, quant, dt)
    return out + _norm(f"{p}.final_layer_norm", d, dt)


def whisper_tensors(cfg: HFConfig, quant: str, dt: str) -> list[TensorInfo]:
    """Whisper's encoder and decoder tensors (HF names, vLLM's fused shapes)."""
    d = cfg.int_("d_model", minimum=1)
    mel = cfg.int_("num_mel_bins", 80, minimum=1)
    enc_ffn = cfg.int_("encoder_ffn_dim", minimum=1)
    dec_ffn = cfg.int_("decoder_ffn_dim", minimum=1)
    out = [
        TensorInfo(name="model.encoder.conv1.weight", dtype=dt, shape=(d, mel, 3)),
        vec("model.encoder.conv1.bias", d, dt),
        TensorInfo(name="model.encoder.conv2.weight", dtype=dt, shape=(d, d, 3)),
        vec("model.encoder.conv2.bias", d, dt),
        TensorInfo(
            name="model.encoder.embed_positions.weight",
            dtype=dt,
            shape=(cfg.int_("max_source_positions", 1500, minimum=1), d),
        ),
    ]
    for i in range(cfg.int_("encoder_layers", minimum=1)):
        out += _layer(f"model.encoder.layers.{i}", d, enc_ffn, quant, dt, cross=False)
    out += _norm("model.encoder.layer_norm", d, dt)
    out.append(
        TensorInfo(
            name="model.decoder.embed_tokens.weight",
            dtype=dt,
            shape=(cfg.int_("vocab_size", minimum=1), d),
        )
    )
    out.append(
        TensorInfo(
            name="model.decoder.embed_positions.weight",
            dtype=dt,
            shape=(cfg.int_("max_target_positions", 448, minimum=1), d),
        )
    )
    for i in range(cfg.int_("decoder_layers", minimum=1)):
        out += _layer(f"model.decoder.layers.{i}", d, dec_ffn, quant, dt, cross=True)
    return out + _norm("model.decoder.layer_norm", d, dt)
