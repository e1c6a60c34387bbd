"""Build the tiny chat tokenizer bundled in ``examples/tiny-chat-tokenizer/``.

A byte-level BPE of 320 tokens trained by the ``tokenizers`` library on the
short corpus below, with four special tokens and a post-processor that puts
``<|bos|>`` in front of every encoded text (so ``add_special_tokens=True``
differs from ``False``, as for Llama 3). The chat template is ChatML-like: it
reads ``bos_token``, refuses unknown roles with ``raise_exception`` and opens
an assistant turn under ``add_generation_prompt``.

Run from the repository root: ``python tools/make_tiny_tokenizer.py``. It
rewrites ``tokenizer.json`` and ``tokenizer_config.json``; training is
deterministic, so a rerun leaves git clean.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

OUT = Path(__file__).resolve().parent.parent / "examples" / "tiny-chat-tokenizer"
SPECIAL = ["<|bos|>", "<|eos|>", "<|im_start|>", "<|im_end|>"]
CORPUS = """\
You are a helpful assistant. Answer briefly and cite the source when you can.
What is the capital of France? The capital of France is Paris.
Summarize the following text in one sentence.
Translate the following sentence into German: the cache is warm.
How many tokens does the prefix cache keep for this prompt?
The quick brown fox jumps over the lazy dog.
Write a short poem about the sea, the wind and the long summer evenings.
Explain what a key-value cache is and why a shared system prompt is cheap.
user assistant system developer
0123456789 + - * / = ( ) [ ] { } < > : ; , . ! ?
"""
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] not in ['system', 'user', 'assistant'] %}"
    "{{ raise_exception('Unknown role: ' + message['role']) }}"
    "{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] | trim + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def build() -> Tokenizer:
    """The trained tokenizer."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(CORPUS.splitlines(), trainer=trainer)
    bos = tokenizer.token_to_id("<|bos|>")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<|bos|> $A", pair="<|bos|> $A $B", special_tokens=[("<|bos|>", bos)]
    )
    return tokenizer


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    build().save(str(OUT / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<|bos|>",
        "eos_token": {  # an AddedToken, as older configs write special tokens
            "__type": "AddedToken",
            "content": "<|im_end|>",
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        },
        "pad_token": "<|eos|>",
        "model_max_length": 4096,
        "chat_template": CHAT_TEMPLATE,
    }
    (OUT / "tokenizer_config.json").write_text(
        json.dumps(config, indent=2) + "\n", encoding="utf-8"
    )


if __name__ == "__main__":
    main()
