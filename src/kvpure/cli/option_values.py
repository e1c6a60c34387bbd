"""Command-line text to typed values: sizes, token counts, switches.

Each reader raises :class:`~kvpure.errors.InvalidFieldError` naming the flag,
so a bad value is one line on stderr and exit code 2. Sizes need a unit
(``24GiB``, ``16GB``, ``512MiB``, or ``B`` for bytes): a bare ``24`` is
refused rather than read as 24 bytes.
"""

from __future__ import annotations

import re
from typing import Final

from kvpure.errors import InvalidFieldError

__all__ = ["parse_bool", "parse_max_model_len", "parse_memory_bytes", "parse_positive_int"]

_UNITS: Final = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
    "k": 2**10,
    "m": 2**20,
    "g": 2**30,
    "t": 2**40,
}
_SIZE: Final = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*([a-zA-Z]*)\s*$")


MAX_MEMORY_BYTES: Final = 2**60
"""The largest size accepted (1 EiB): far above any GPU, small enough to stay exact."""
_MAX_DIGITS: Final = 40
MAX_COUNT_OPTION: Final = 2**62
"""The largest count an option takes (a block count, a number of requests or GPUs)."""
_UNIT_NAMES: Final = "B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024)"


def parse_memory_bytes(text: str, *, field: str = "--kv-cache-memory") -> int:
    """``"24GiB"``, ``"24 GiB"``, ``"16GB"``, ``"512MiB"``, ``"1000B"`` -> bytes.

    GiB/MiB/KiB/TiB (and bare G/M/K/T) are powers of 1024, GB/MB/KB/TB powers
    of 1000, B is bytes; a fractional result is rounded down to whole bytes.
    A number without a unit is refused: ``24`` is far more often a forgotten
    ``GiB`` than 24 bytes.
    """
    match = _SIZE.match(text) if len(text) <= _MAX_DIGITS else None
    if match is not None and match.group(2) == "":
        raise InvalidFieldError(
            field=field, value=text, reason=f"needs a unit: one of {_UNIT_NAMES}, e.g. {text}GiB"
        )
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS:
        raise InvalidFieldError(
            field=field,
            value=text if len(text) <= _MAX_DIGITS else text[:_MAX_DIGITS] + "...",
            reason=f"must be a size such as 24GiB, 16GB or 512MiB; units: {_UNIT_NAMES}",
        )
    number = match.group(1)
    if "." in number:
        whole, _, frac = number.partition(".")
        denominator: int = 10 ** len(frac)
        value = (int(whole or "0") * denominator + int(frac)) * _UNITS[unit] // denominator
    else:
        value = int(number) * _UNITS[unit]
    if value > MAX_MEMORY_BYTES:
        raise InvalidFieldError(field=field, value=text, reason="must be at most 1 EiB (2**60 B)")
    return value


def parse_positive_int(text: str, *, field: str) -> int:
    """A whole number of at least 1."""
    if len(text) > _MAX_DIGITS:
        raise InvalidFieldError(
            field=field, value=text[:_MAX_DIGITS] + "...", reason="is too long for a count"
        )
    try:
        value = int(text.strip())
    except ValueError:
        raise InvalidFieldError(field=field, value=text, reason="must be a whole number") from None
    if value < 1:
        raise InvalidFieldError(field=field, value=value, reason="must be at least 1")
    if value > MAX_COUNT_OPTION:
        raise InvalidFieldError(
            field=field, value=value, reason=f"must be at most {MAX_COUNT_OPTION}"
        )
    return value


def parse_max_model_len(text: str, *, field: str = "--max-model-len") -> int | None:
    """Tokens, or ``auto`` / ``-1`` (auto-fit: returns None).

    As vLLM reads it: ``k``/``m`` are powers of 1000 and ``K``/``M`` powers
    of 1024 (``32k`` = 32000, ``32K`` = 32768, ``25.6k`` = 25600).
    """
    cleaned = text.strip()
    if len(cleaned) > _MAX_DIGITS:
        raise InvalidFieldError(
            field=field, value=cleaned[:_MAX_DIGITS] + "...", reason="is too long for a length"
        )
    if cleaned.lower() in ("auto", "-1"):
        return None
    scales = {"k": 1000, "m": 1000**2, "g": 1000**3, "K": 1024, "M": 1024**2, "G": 1024**3}
    scale = scales.get(cleaned[-1:], 1)
    digits = cleaned[:-1] if cleaned[-1:] in scales else cleaned
    match = re.fullmatch(r"(\d+)(?:\.(\d+))?", digits)
    if match is None:
        raise InvalidFieldError(
            field=field, value=text, reason="must be a number of tokens (e.g. 32768, 32K) or auto"
        )
    frac = match.group(2) or ""
    denominator: int = 10 ** len(frac)
    numerator = (int(match.group(1)) * denominator + int(frac or "0")) * scale
    if numerator % denominator:
        raise InvalidFieldError(field=field, value=text, reason="must be a whole number of tokens")
    value = numerator // denominator
    if value < 1:
        raise InvalidFieldError(field=field, value=value, reason="must be at least 1, or auto")
    return value


def parse_bool(text: str, *, field: str) -> bool:
    """``on/off``, ``true/false``, ``yes/no``, ``1/0``."""
    cleaned = text.strip().lower()
    if cleaned in ("on", "true", "yes", "1"):
        return True
    if cleaned in ("off", "false", "no", "0"):
        return False
    raise InvalidFieldError(field=field, value=text, reason="must be on or off")
