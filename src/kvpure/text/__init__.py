"""Text prompts for the workload analyzer: a local tokenizer and the model's chat template.

Optional: needs the ``text`` extra (``pip install 'kvpure[text]'``: the
``tokenizers`` library and jinja2), imported only when a tokenizer is loaded.
"""

from __future__ import annotations

from kvpure.text.chat_template import ChatMessage, ChatTemplate, ContentFormat
from kvpure.text.errors import ChatTemplateError, MissingExtraError
from kvpure.text.tokenizer import LocalTokenizer, load_tokenizer

__all__ = [
    "ChatMessage",
    "ChatTemplate",
    "ChatTemplateError",
    "ContentFormat",
    "LocalTokenizer",
    "MissingExtraError",
    "load_tokenizer",
]
