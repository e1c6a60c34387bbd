"""Token-id checks at the hashing boundary: ints, not negative, and (0.34) signed int32.

vLLM 0.34 keeps a request's tokens in a ``TokenBuffer`` (``vllm/v1/token_buffer.py``, an
``array("i")``), so a request holding an id outside ``[-2**31, 2**31 - 1]`` cannot be built
(``OverflowError``); 0.26 and 0.33 hold any Python int. kvpure refuses such an id under a
profile with ``int32_token_ids``, naming its position, when it is hashed. Every profile refuses
what is not a token id at all: a bool, a float, a negative id (a vocabulary index is 0 or
more). The scans run in C where the extension is built (about 1 ns per token).
"""

from __future__ import annotations

from collections.abc import Sequence

from kvpure.errors import InvalidFieldError
from kvpure.hashing.accelerator import first_bad_token
from kvpure.hashing.scheme import INT32_MAX, VllmHashProfile

__all__ = ["check_token_ids", "token_id_error"]


def token_id_error(field: str, token: object, profile: VllmHashProfile | None) -> InvalidFieldError:
    """The error for ``token`` found at ``field`` (``prompt_token_ids[3]``, ...)."""
    if not isinstance(token, int) or type(token) is bool:
        reason = "a token id is an int (a vocabulary index), not a bool, float or str"
    elif token < 0:
        reason = "a token id is a vocabulary index, 0 or more"
    else:
        name = "this profile" if profile is None else profile.name
        reason = (
            f"{name} holds token ids as signed int32 (vLLM 0.34's TokenBuffer): "
            f"at most {INT32_MAX}; use --vllm 0.33 (VLLM_0_33) to hash larger ids as 0.33 does"
        )
    return InvalidFieldError(field=field, value=token, reason=reason)


def check_token_ids(
    profile: VllmHashProfile | None,
    token_ids: Sequence[object],
    *,
    field: str,
    offset: int = 0,
) -> bool:
    """Refuse the first id of ``token_ids`` that is not an int in ``[0, 2**31 - 1]`` (int32
    profiles) or ``[0, inf)`` (others, and ``profile`` None), naming it as
    ``field[offset + index]``. Returns whether every id fits in int32 (one scan, in C
    where built)."""
    int32 = profile is not None and profile.int32_token_ids
    index = first_bad_token(token_ids, 0, INT32_MAX)
    if index < 0:
        return True
    token = token_ids[index]
    if int32 or not isinstance(token, int) or type(token) is bool or token < 0:
        raise token_id_error(f"{field}[{offset + index}]", token, profile)
    # a large id, allowed here: the rest must still be ints of 0 or more
    rest = first_bad_token(token_ids[index + 1 :], 0, None)
    if rest >= 0:
        raise token_id_error(
            f"{field}[{offset + index + 1 + rest}]", token_ids[index + 1 + rest], profile
        )
    return False
