"""config.json reading and the per-family layer rules (no deployment yet).

Expected layouts come from the public model cards and vLLM's model code,
reasoned out by hand (which layers slide, which are global), not from the
code under test.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvpure.errors import InvalidFieldError, KVPureValueError
from kvpure.models.architectures import SUPPORTED_ARCHITECTURES, model_layout
from kvpure.models.config import parse_model_config
from kvpure.models.errors import MissingConfigFieldError, ModelConfigError, UnknownArchitectureError
from kvpure.models.layout import AttentionKind, AttentionLayer, Mamba2Layer, ModelLayout

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load(name: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((EXAMPLES / name).read_text())
    return data


def layout_of(name: str) -> ModelLayout:
    return model_layout(parse_model_config(load(name)))


def kinds(layout: ModelLayout) -> list[AttentionKind | str]:
    return [layer.kind if isinstance(layer, AttentionLayer) else "mamba" for layer in layout.layers]


def test_llama3_8b_is_32_full_layers_of_8_kv_heads() -> None:
    layout = layout_of("llama3_8b.json")
    assert layout.architecture == "LlamaForCausalLM"
    assert kinds(layout) == [AttentionKind.FULL] * 32
    first = layout.attention_layers[0]
    assert (first.num_kv_heads, first.head_size, first.head_size_v) == (8, 128, 128)
    assert [layer.name for layer in layout.layers][:2] == [
        "model.layers.0.self_attn.attn",
        "model.layers.1.self_attn.attn",
    ]
    assert layout.config_dtype == "bfloat16"
    assert layout.derived_max_model_len == 8192


def test_mistral_v01_slides_every_layer_over_4096_tokens() -> None:
    layout = layout_of("mistral_7b_v0_1.json")
    assert kinds(layout) == [AttentionKind.SLIDING_WINDOW] * 32
    assert {layer.sliding_window for layer in layout.attention_layers} == {4096}
    assert layout.derived_max_model_len == 32768


def test_qwen_models_without_use_sliding_window_are_all_full() -> None:
    qwen2 = layout_of("qwen2_7b.json")
    assert kinds(qwen2) == [AttentionKind.FULL] * 28
    # Qwen2-7B has no head_dim: 3584 / 28 heads = 128.
    assert qwen2.attention_layers[0].head_size == 128
    assert qwen2.attention_layers[0].num_kv_heads == 4
    qwen3 = layout_of("qwen3_8b.json")
    assert kinds(qwen3) == [AttentionKind.FULL] * 36
    assert qwen3.derived_max_model_len == 40960


def test_qwen_with_use_sliding_window_slides_from_max_window_layers() -> None:
    data = load("qwen2_7b.json") | {
        "use_sliding_window": True,
        "max_window_layers": 20,
        "sliding_window": 4096,
    }
    layout = model_layout(parse_model_config(data))
    assert kinds(layout) == [AttentionKind.FULL] * 20 + [AttentionKind.SLIDING_WINDOW] * 8


def test_gemma2_even_layers_slide() -> None:
    layout = layout_of("gemma2_9b.json")
    expected = [
        AttentionKind.SLIDING_WINDOW if i % 2 == 0 else AttentionKind.FULL for i in range(42)
    ]
    assert kinds(layout) == expected
    assert layout.config_dtype == "float32"


def test_gemma3_every_sixth_layer_is_global() -> None:
    layout = layout_of("gemma3_12b.json")
    full = [i for i, kind in enumerate(kinds(layout)) if kind is AttentionKind.FULL]
    assert full == [5, 11, 17, 23, 29, 35, 41, 47]
    assert {
        layer.sliding_window for layer in layout.attention_layers if layer.index not in full
    } == {1024}
    assert layout.attention_layers[0].head_size == 256
    # Gemma-3's 128K already includes its linear RoPE factor: vLLM skips it.
    assert layout.derived_max_model_len == 131072


def test_gemma3_layer_types_win_over_the_pattern() -> None:
    types = ["full_attention"] * 2 + ["sliding_attention"] * 46
    layout = model_layout(parse_model_config(load("gemma3_12b.json") | {"layer_types": types}))
    assert kinds(layout)[:3] == [
        AttentionKind.FULL,
        AttentionKind.FULL,
        AttentionKind.SLIDING_WINDOW,
    ]


def test_gemma3_multimodal_reads_text_config_and_prefixes_language_model() -> None:
    text = {
        "hidden_size": 3840,
        "model_type": "gemma3_text",
        "num_attention_heads": 16,
        "num_hidden_layers": 48,
        "num_key_value_heads": 8,
        "sliding_window": 1024,
    }
    data = {
        "architectures": ["Gemma3ForConditionalGeneration"],
        "model_type": "gemma3",
        "text_config": text,
        "torch_dtype": "bfloat16",
    }
    layout = model_layout(parse_model_config(data))
    assert layout.layers[0].name == "language_model.model.layers.0.self_attn.attn"
    # HF defaults for the partial text config: head_dim 256, pattern 6, 128K.
    assert layout.attention_layers[0].head_size == 256
    assert kinds(layout)[5] is AttentionKind.FULL
    assert layout.derived_max_model_len == 131072


def test_gpt_oss_alternates_sliding_128_and_full() -> None:
    layout = layout_of("gpt_oss_20b.json")
    expected = [
        AttentionKind.SLIDING_WINDOW if i % 2 == 0 else AttentionKind.FULL for i in range(24)
    ]
    assert kinds(layout) == expected
    assert layout.attention_layers[0].sliding_window == 128
    assert layout.attention_layers[0].head_size == 64
    # yarn: original 4096 x factor 32.
    assert layout.derived_max_model_len == 131072


def test_llama4_scout_every_fourth_layer_is_global_the_rest_chunked() -> None:
    layout = layout_of("llama4_scout.json")
    full = [i for i, kind in enumerate(kinds(layout)) if kind is AttentionKind.FULL]
    assert full == list(range(3, 48, 4))
    chunked = [layer for layer in layout.attention_layers if layer.index not in full]
    assert len(chunked) == 36
    assert {layer.attention_chunk_size for layer in chunked} == {8192}
    assert layout.layers[0].name == "language_model.model.layers.0.self_attn.attn"
    # llama3 RoPE scaling is not applied to the length.
    assert layout.derived_max_model_len == 10485760


def test_deepseek_mla_head_is_kv_lora_rank_plus_rope_dim() -> None:
    for name, num_layers in (("deepseek_v3.json", 61), ("deepseek_v2_lite.json", 27)):
        layout = layout_of(name)
        assert kinds(layout) == [AttentionKind.MLA] * num_layers
        assert {(layer.num_kv_heads, layer.head_size) for layer in layout.attention_layers} == {
            (1, 512 + 64)
        }
        assert layout.uses_mla
        # yarn: original 4096 x factor 40 (the old "type" key).
        assert layout.derived_max_model_len == 163840


def test_granite_4_h_mixes_mamba2_mixers_and_attention() -> None:
    layout = layout_of("granite_4_0_h_small.json")
    attention = [layer.index for layer in layout.attention_layers]
    assert attention == [5, 15, 25, 35]
    assert len(layout.mamba_layers) == 36
    mixer = layout.mamba_layers[0]
    assert mixer == Mamba2Layer(
        index=0,
        name="model.layers.0.mixer",
        num_heads=128,
        head_dim=64,
        state_size=128,
        n_groups=1,
        intermediate_size=2 * 4096,
        conv_kernel=4,
    )
    assert layout.attention_layers[0].head_size == 4096 // 32
    assert layout.mamba_chunk_size == 256


def test_every_bundled_example_reads() -> None:
    for path in sorted(EXAMPLES.glob("*.json")):
        data = json.loads(path.read_text())
        if "architectures" in data:
            assert model_layout(parse_model_config(data)).layers


def test_unknown_architecture_names_it_and_lists_the_supported_ones() -> None:
    data = load("llama3_8b.json") | {"architectures": ["FancyNewForCausalLM"]}
    with pytest.raises(UnknownArchitectureError) as info:
        model_layout(parse_model_config(data))
    err = info.value
    assert isinstance(err, ModelConfigError)
    assert isinstance(err, ValueError)
    assert err.architecture == "FancyNewForCausalLM"
    assert "FancyNewForCausalLM" in str(err)
    assert "LlamaForCausalLM" in str(err)
    assert "GraniteMoeHybridForCausalLM" in str(err)
    assert err.supported == SUPPORTED_ARCHITECTURES
    back = pickle.loads(pickle.dumps(err))
    assert back.architecture == err.architecture


def test_the_first_known_architecture_is_used() -> None:
    data = load("llama3_8b.json") | {"architectures": ["Unknown", "LlamaForCausalLM"]}
    assert model_layout(parse_model_config(data)).architecture == "LlamaForCausalLM"


@pytest.mark.parametrize(
    ("example", "field", "shown"),
    [
        ("llama3_8b.json", "num_hidden_layers", "num_hidden_layers"),
        ("llama3_8b.json", "num_attention_heads", "num_attention_heads"),
        ("deepseek_v3.json", "kv_lora_rank", "kv_lora_rank"),
        ("gemma3_12b.json", "num_hidden_layers", "num_hidden_layers"),
        ("granite_4_0_h_small.json", "mamba_d_state", "mamba_d_state"),
        ("llama4_scout.json", "text_config", "text_config"),
    ],
)
def test_a_missing_field_is_named_with_the_architecture(
    example: str, field: str, shown: str
) -> None:
    data = load(example)
    del data[field]
    with pytest.raises(MissingConfigFieldError) as info:
        model_layout(parse_model_config(data))
    assert info.value.field == shown
    assert shown in str(info.value)
    assert str(data["architectures"][0]) in str(info.value)  # type: ignore[index]  # a list in the file


def test_a_missing_nested_field_is_named_with_its_path() -> None:
    data = load("llama4_scout.json")
    text = dict(data["text_config"])  # type: ignore[call-overload]  # an object in the file
    del text["num_hidden_layers"]
    with pytest.raises(MissingConfigFieldError) as info:
        model_layout(parse_model_config(data | {"text_config": text}))
    assert info.value.field == "text_config.num_hidden_layers"


def test_missing_architectures_is_named() -> None:
    data = load("llama3_8b.json")
    del data["architectures"]
    with pytest.raises(MissingConfigFieldError, match="architectures"):
        model_layout(parse_model_config(data))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("num_hidden_layers", "32"),
        ("num_hidden_layers", 0),
        ("num_key_value_heads", 2.5),
        ("num_attention_heads", True),
        ("architectures", "LlamaForCausalLM"),
    ],
)
def test_a_field_of_the_wrong_kind_is_named(field: str, value: object) -> None:
    data = load("llama3_8b.json") | {field: value}
    with pytest.raises(InvalidFieldError) as info:
        model_layout(parse_model_config(data))
    assert field in info.value.field


def test_a_config_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(KVPureValueError, match="JSON object"):
        parse_model_config([1, 2])


def test_layer_types_shorter_than_the_layers_is_refused() -> None:
    data = load("gpt_oss_20b.json") | {"layer_types": ["sliding_attention"] * 3}
    with pytest.raises(InvalidFieldError, match="layer_types"):
        model_layout(parse_model_config(data))


def test_an_unknown_layer_type_is_named() -> None:
    data = load("gpt_oss_20b.json")
    types = ["sliding_attention", "full_attention"] * 12
    types[7] = "linear_attention"
    with pytest.raises(InvalidFieldError, match=r"layer_types\[7\]"):
        model_layout(parse_model_config(data | {"layer_types": types}))


@given(
    st.integers(min_value=1, max_value=64),
    st.integers(min_value=1, max_value=8),
)
def test_gemma3_pattern_gives_one_global_layer_per_pattern(num_layers: int, pattern: int) -> None:
    data = load("gemma3_12b.json") | {
        "num_hidden_layers": num_layers,
        "sliding_window_pattern": pattern,
    }
    layout = model_layout(parse_model_config(data))
    full = [i for i, kind in enumerate(kinds(layout)) if kind is AttentionKind.FULL]
    assert full == [i for i in range(num_layers) if i % pattern == pattern - 1]


@given(st.integers(min_value=1, max_value=2**20), st.sampled_from([2.0, 4.0, 8.0]))
def test_linear_rope_scaling_multiplies_the_length(length: int, factor: float) -> None:
    data = load("llama3_8b.json") | {
        "max_position_embeddings": length,
        "rope_scaling": {"rope_type": "linear", "factor": factor},
    }
    assert parse_model_config(data).derived_max_model_len() == int(length * factor)


def test_the_smallest_length_key_wins() -> None:
    data = load("llama3_8b.json") | {"max_position_embeddings": 8192, "seq_length": 4096}
    assert parse_model_config(data).derived_max_model_len() == 4096


def test_longrope_defaults_to_the_original_length() -> None:
    # Phi-3-mini-128k style: LongRoPE; vLLM defaults to original_max_position_embeddings.
    data = load("llama3_8b.json") | {
        "architectures": ["Phi3ForCausalLM"],
        "max_position_embeddings": 131072,
        "original_max_position_embeddings": 4096,
        "rope_scaling": {"type": "longrope", "long_factor": [1.0], "short_factor": [1.0]},
    }
    layout = model_layout(parse_model_config(data))
    assert layout.derived_max_model_len == 131072
    assert layout.default_max_model_len == 4096


def test_model_config_errors_pickle_with_their_attributes() -> None:
    from kvpure.cli.errors import MissingOptionError

    for err in (
        MissingConfigFieldError(field="text_config.head_dim", architecture="Gemma3ForCausalLM"),
        MissingOptionError(option="--kv-cache-memory", reason="for a config.json"),
    ):
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err)
        assert str(back) == str(err)
        assert back.__dict__ == err.__dict__
        assert isinstance(back, ModelConfigError)
