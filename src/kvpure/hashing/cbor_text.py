"""Text that CBOR cannot write: a request's strings checked before a CBOR algorithm hashes them."""

from __future__ import annotations

from kvpure.errors import InvalidFieldError
from kvpure.hashing.request import HashRequest

__all__ = ["check_cbor_text"]


def check_cbor_text(request: HashRequest) -> None:
    """Refuse a string of ``request`` that holds a lone surrogate (``"\\ud800"``), naming its
    field: CBOR (``sha256_cbor``, ``xxhash_cbor``) writes text as UTF-8, which cannot hold
    one, so vLLM's cbor2 fails on it (``UnicodeEncodeError``). The pickle algorithms hash
    such strings (pickle writes them with ``surrogatepass``). ASCII text is passed at once."""
    named: list[tuple[str, str | None]] = [
        ("lora_name", request.lora_name),
        ("lora_path", request.lora_path),
        ("cache_salt", request.cache_salt),
    ]
    named += [
        (f"mm_features[{index}].identifier", feature.identifier)
        for index, feature in enumerate(request.mm_features)
    ]
    for field, text in named:
        if text is None or text.isascii():
            continue
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as err:
            raise InvalidFieldError(
                field=field,
                value=text,
                reason=f"holds a lone surrogate at {err.start}: the CBOR algorithms "
                "(sha256_cbor, xxhash_cbor) write text as UTF-8, which cannot hold it "
                "(vLLM's cbor2 fails too); pass well-formed text, or hash with sha256/xxhash",
            ) from None
