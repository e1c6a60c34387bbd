"""The top shared prefixes in ``kvpure cache``'s report (text and ``--json``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from kvpure.cache.shared_prefixes import SharedPrefix

__all__ = ["Decoder", "format_prefixes", "prefixes_to_json"]

Decoder = Callable[[Sequence[int]], str]
"""Token ids to text (:meth:`kvpure.text.LocalTokenizer.decode`)."""

_TEXT_CHARS = 48


def _preview_text(prefix: SharedPrefix, decode: Decoder | None) -> str | None:
    return None if decode is None else decode(prefix.preview_token_ids)


def prefixes_to_json(
    prefixes: Sequence[SharedPrefix], decode: Decoder | None = None
) -> list[dict[str, Any]]:
    """The prefixes as JSON values (``preview_text`` with a tokenizer only)."""
    out: list[dict[str, Any]] = []
    for prefix in prefixes:
        item: dict[str, Any] = {
            "length_tokens": prefix.length,
            "requests": prefix.requests,
            "hit_tokens": prefix.hit_tokens,
            "first_request": prefix.first_source or prefix.first_request,
            "preview_token_ids": list(prefix.preview_token_ids),
        }
        text = _preview_text(prefix, decode)
        if text is not None:
            item["preview_text"] = text
        out.append(item)
    return out


def format_prefixes(prefixes: Sequence[SharedPrefix], decode: Decoder | None = None) -> str:
    """Lines listing the prefixes ('' when nothing hit)."""
    if not prefixes:
        return ""
    lines = ["top shared prefixes (hit tokens = length x requests served it):"]
    for rank, prefix in enumerate(prefixes, start=1):
        text = _preview_text(prefix, decode)
        if text is None:
            shown = " ".join(map(str, prefix.preview_token_ids[:8])) + " ..."
        else:
            quoted = json.dumps(text, ensure_ascii=False)
            shown = quoted if len(quoted) <= _TEXT_CHARS else quoted[: _TEXT_CHARS - 4] + '..."'
        where = prefix.first_source or f"request {prefix.first_request + 1}"
        lines.append(
            f"  {rank}. {prefix.hit_tokens:>9,} = {prefix.length:,} tokens x "
            f"{prefix.requests:,} request(s), first served to {where}: {shown}"
        )
    return "\n".join(lines)
