"""A block's extra keys, exactly as each vLLM profile builds them.

For the block of tokens ``[start, end)`` the keys are, in this order:

1. LoRA: the adapter name on every block (0.33: ``("lora", name, path)``).
2. Multimodal: for each item overlapping the block, ``(identifier, offset -
   start)`` (0.33: ``("mm", identifier, offset - start)``); the relative
   offset is negative for an item that began in an earlier block.
3. Cache salt: on the block starting at token 0 only, and only if the salt
   is non-empty (0.33: ``("cache_salt", salt)``).
4. Prompt embeddings: ``sha256`` of the raw bytes of the block's rows (0.33:
   ``("prompt_embeds", digest)``). The rows are sliced like a tensor, so a
   block past the prompt hashes the rows it still has, possibly none.

No keys give None. The multimodal scan follows vLLM's: it returns at once
when the last item ends at or before ``start``, skips items that end at or
before ``start``, stops at the first item starting at or after ``end``, and
moves on past an item only if the block holds its end.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

from kvpure.hashing.request import HashRequest, MultiModalFeature
from kvpure.hashing.scheme import ExtraKeyStyle, MmResumeRule, VllmHashProfile

ExtraKeys = tuple[object, ...] | None
"""A block's extra keys: a tuple, or None when the block has none."""

_LORA_TAG = "lora"
_MM_TAG = "mm"
_CACHE_SALT_TAG = "cache_salt"
_PROMPT_EMBEDS_TAG = "prompt_embeds"


def _bare_lora(request: HashRequest) -> object:
    return request.lora_name


def _tagged_lora(request: HashRequest) -> object:
    return (_LORA_TAG, request.lora_name, request.lora_path)


def _bare_mm(identifier: str, relative_offset: int) -> object:
    return (identifier, relative_offset)


def _tagged_mm(identifier: str, relative_offset: int) -> object:
    return (_MM_TAG, identifier, relative_offset)


def _bare_single(_tag: str, value: object) -> object:
    return value


def _tagged_single(tag: str, value: object) -> object:
    return (tag, value)


_LORA_KEY: Mapping[ExtraKeyStyle, Callable[[HashRequest], object]] = MappingProxyType(
    {ExtraKeyStyle.BARE: _bare_lora, ExtraKeyStyle.TAGGED: _tagged_lora}
)
_MM_KEY: Mapping[ExtraKeyStyle, Callable[[str, int], object]] = MappingProxyType(
    {ExtraKeyStyle.BARE: _bare_mm, ExtraKeyStyle.TAGGED: _tagged_mm}
)
_SINGLE_KEY: Mapping[ExtraKeyStyle, Callable[[str, object], object]] = MappingProxyType(
    {ExtraKeyStyle.BARE: _bare_single, ExtraKeyStyle.TAGGED: _tagged_single}
)


def _mm_keys(
    features: Sequence[MultiModalFeature],
    start: int,
    end: int,
    start_mm_idx: int,
    make_key: Callable[[str, int], object],
    keys: list[object],
) -> int:
    """Append the multimodal keys of block ``[start, end)``; return the next index."""
    if not features:
        return start_mm_idx
    if features[-1].end <= start:
        return start_mm_idx
    index = len(features) + start_mm_idx if start_mm_idx < 0 else start_mm_idx
    while index < len(features):
        feature = features[index]
        if end <= feature.offset:
            break
        if start >= feature.end:
            index += 1
            continue
        keys.append(make_key(feature.identifier, feature.offset - start))
        if end >= feature.end:
            index += 1
        else:
            break
    return index


def generate_block_hash_extra_keys(
    profile: VllmHashProfile,
    request: HashRequest,
    start_token_idx: int,
    end_token_idx: int,
    start_mm_idx: int,
) -> tuple[ExtraKeys, int]:
    """The extra keys of block ``[start_token_idx, end_token_idx)`` and the next mm index.

    ``start_mm_idx`` is where the multimodal scan starts (-1: the last item), as
    in vLLM's function of the same name.
    """
    style = profile.extra_key_style
    lora, salt = _lora_and_salt_keys(profile, request)
    keys: list[object] = [*lora]
    next_mm_idx = _mm_keys(
        request.mm_features, start_token_idx, end_token_idx, start_mm_idx, _MM_KEY[style], keys
    )
    if start_token_idx == 0:
        keys += salt
    embeds = request.prompt_embeds
    if embeds is not None:
        digest = hashlib.sha256(embeds.rows_bytes(start_token_idx, end_token_idx)).digest()
        keys.append(_SINGLE_KEY[style](_PROMPT_EMBEDS_TAG, digest))
    return (tuple(keys) if keys else None), next_mm_idx


def _resume_last_item(_features: Sequence[MultiModalFeature], _start: int) -> int:
    return -1


def _resume_first_overlapping(features: Sequence[MultiModalFeature], start: int) -> int:
    # The first item ending after ``start``. Where none does (or there are none),
    # vLLM starts at 0 and this gives len(features): either way the scan returns
    # at once, as the last item ends at or before ``start``.
    return bisect.bisect_left(features, start + 1, key=lambda feature: feature.end)


_RESUME: Mapping[MmResumeRule, Callable[[Sequence[MultiModalFeature], int], int]] = (
    MappingProxyType(
        {
            MmResumeRule.LAST_ITEM: _resume_last_item,
            MmResumeRule.FIRST_OVERLAPPING: _resume_first_overlapping,
        }
    )
)


def resume_mm_index(profile: VllmHashProfile, request: HashRequest, start_token_idx: int) -> int:
    """The multimodal index vLLM's hasher starts from when it resumes at ``start_token_idx``."""
    if start_token_idx == 0:
        return 0
    return _RESUME[profile.mm_resume_rule](request.mm_features, start_token_idx)


def steady_extra_keys_start(request: HashRequest, block_size: int) -> int | None:
    """The first block start from which every block has the same extra keys, or None.

    None with prompt embeddings (each block hashes its own rows). Otherwise it is the
    first block start past token 0 (the cache salt) and past the end of the last
    multimodal item: from there vLLM's scan returns at once, whatever its index, so a
    block has the LoRA key or nothing (:func:`steady_extra_keys`).
    """
    if request.prompt_embeds is not None:
        return None
    features = request.mm_features
    last_end = features[-1].end if features else 0
    return max(block_size, -(-last_end // block_size) * block_size)


def steady_extra_keys(profile: VllmHashProfile, request: HashRequest) -> ExtraKeys:
    """The extra keys of every block from :func:`steady_extra_keys_start` on."""
    lora, _ = _lora_and_salt_keys(profile, request)
    return lora or None


def uniform_prompt_extra_keys(
    profile: VllmHashProfile, request: HashRequest
) -> tuple[ExtraKeys, ExtraKeys] | None:
    """A prompt's block-0 keys and every later block's, where they are the same from block 1
    on (no multimodal items, no prompt embeddings): :func:`extra_keys_for_blocks` from token
    0 is ``[first, rest, rest, ...]``. None otherwise."""
    if request.prompt_embeds is not None or request.mm_features:
        return None
    lora, salt = _lora_and_salt_keys(profile, request)
    return (*lora, *salt) or None, lora or None


def _lora_and_salt_keys(
    profile: VllmHashProfile, request: HashRequest
) -> tuple[tuple[object, ...], tuple[object, ...]]:
    """The LoRA key (of every block) and the cache-salt key (of block 0), each as a tuple
    of one key, or empty where the request has none."""
    style = profile.extra_key_style
    lora = () if request.lora_name is None else (_LORA_KEY[style](request),)
    salt = (_SINGLE_KEY[style](_CACHE_SALT_TAG, request.cache_salt),) if request.cache_salt else ()
    return lora, salt


def _uniform_extra_keys(
    profile: VllmHashProfile, request: HashRequest, start_token_idx: int, num_blocks: int
) -> list[ExtraKeys]:
    """The keys every block has without its multimodal items (embeddings excluded): the
    LoRA key or nothing, plus the cache salt on block 0. Built once, shared by the blocks.
    """
    lora, salt = _lora_and_salt_keys(profile, request)
    rest = lora or None
    keys = [rest] * num_blocks
    if start_token_idx == 0 and keys:
        keys[0] = (*lora, *salt) or None
    return keys


def _prompt_extra_keys_with_mm(
    profile: VllmHashProfile, request: HashRequest, block_size: int, num_blocks: int
) -> list[ExtraKeys]:
    """A prompt's keys from token 0: the uniform keys, except where a multimodal item is.

    Scanning from the first block, vLLM's multimodal index never skips an item, and the
    items are sorted and do not overlap (``HashRequest`` checks), so a block's multimodal
    keys are those of the items overlapping it, in order: each item is added to the
    blocks it overlaps, between the LoRA key and (block 0) the cache salt.
    """
    result = _uniform_extra_keys(profile, request, 0, num_blocks)
    make_key = _MM_KEY[profile.extra_key_style]
    mm_keys: dict[int, list[object]] = {}
    for feature in request.mm_features:
        offset = feature.offset
        last = min((offset + feature.length - 1) // block_size, num_blocks - 1)
        for index in range(offset // block_size, last + 1):
            keys = mm_keys.get(index)
            if keys is None:
                keys = mm_keys[index] = []
            keys.append(make_key(feature.identifier, offset - index * block_size))
    lora, salt = _lora_and_salt_keys(profile, request)
    for index, keys in mm_keys.items():
        result[index] = (*lora, *keys, *salt) if index == 0 else (*lora, *keys)
    return result


def extra_keys_for_blocks(
    profile: VllmHashProfile,
    request: HashRequest,
    block_size: int,
    start_token_idx: int,
    num_blocks: int,
) -> list[ExtraKeys]:
    """The extra keys of ``num_blocks`` consecutive blocks from ``start_token_idx``.

    This is one call of vLLM's request block hasher: the multimodal index
    starts by the profile's resume rule and carries from block to block.
    """
    if request.prompt_embeds is None and num_blocks > 0:
        steady_start = steady_extra_keys_start(request, block_size)
        if steady_start is not None and start_token_idx >= steady_start:
            return [steady_extra_keys(profile, request)] * num_blocks
        if not request.mm_features:
            return _uniform_extra_keys(profile, request, start_token_idx, num_blocks)
        if start_token_idx == 0:
            return _prompt_extra_keys_with_mm(profile, request, block_size, num_blocks)
    mm_idx = resume_mm_index(profile, request, start_token_idx)
    result: list[ExtraKeys] = []
    start = start_token_idx
    for _ in range(num_blocks):
        keys, mm_idx = generate_block_hash_extra_keys(
            profile, request, start, start + block_size, mm_idx
        )
        result.append(keys)
        start += block_size
    return result


def lookahead_extra_keys_for_blocks(
    profile: VllmHashProfile,
    request: HashRequest,
    block_size: int,
    start_token_idx: int,
    num_blocks: int,
    lookahead: int,
    window: Sequence[int],
) -> list[ExtraKeys]:
    """The extra keys of ``num_blocks`` blocks from ``start_token_idx`` hashed with ``lookahead``
    (L >= 1) tokens, as one call of vLLM 0.33+'s request block hasher with
    ``num_hash_lookahead_tokens`` L (``vllm/v1/core/kv_cache_utils.py``:
    ``get_request_block_hasher``, ``generate_lookahead_block_hash_extra_keys``).

    Block ``[s, e)`` gets ``(E, t[e], ..., t[e+L-1])``: ``E`` its keys over ``[s, e + L)``
    (:func:`lookahead_base_keys`), the tokens those after it. ``window`` holds the tokens
    ``[start_token_idx, start_token_idx + num_blocks * block_size + L)``.
    """
    bases = lookahead_base_keys(
        profile, request, block_size, start_token_idx, num_blocks, lookahead
    )
    return with_lookahead_tokens(bases, window, block_size, lookahead)


def lookahead_base_keys(
    profile: VllmHashProfile,
    request: HashRequest,
    block_size: int,
    start_token_idx: int,
    num_blocks: int,
    lookahead: int,
) -> list[ExtraKeys]:
    """Each block's ``E`` under lookahead L: its extra keys over ``[s, e + L)`` (None where
    there are none; the embeddings digest over those rows too). After each block the
    multimodal index is rewound to the first item that ends after ``e``, so an item inside
    the lookahead window is met again by the next block. Blocks starting at or past the last
    multimodal item (without embeddings) share one value, built once."""
    features = request.mm_features
    if request.prompt_embeds is not None:
        num_scanned = num_blocks
    else:  # a block starting at or past the last item's end has no multimodal key
        last_end = features[-1].end if features else 0
        behind = last_end - start_token_idx
        num_scanned = 0 if behind <= 0 else min(num_blocks, -(-behind // block_size))
    bases: list[ExtraKeys] = []
    if num_scanned:
        mm_idx = resume_mm_index(profile, request, start_token_idx)
        start = start_token_idx
        for _ in range(num_scanned):
            end = start + block_size
            keys, mm_idx = generate_block_hash_extra_keys(
                profile, request, start, end + lookahead, mm_idx
            )
            while mm_idx > 0 and features[mm_idx - 1].end > end:
                mm_idx -= 1
            bases.append(keys)
            start = end
    if num_scanned < num_blocks:
        bases += _uniform_extra_keys(
            profile,
            request,
            start_token_idx + num_scanned * block_size,
            num_blocks - num_scanned,
        )
    return bases


def with_lookahead_tokens(
    bases: Sequence[ExtraKeys], window: Sequence[int], block_size: int, lookahead: int
) -> list[ExtraKeys]:
    """``(E_i, t[e_i], ..., t[e_i + L - 1])`` for each block ``i`` of ``window`` (its blocks'
    tokens then L more): vLLM's ``(extra_keys, *all_token_ids[e:e + L])``."""
    last = len(bases) * block_size  # the end of the last block, relative to the window
    if lookahead == 1:
        return list(zip(bases, window[block_size : last + 1 : block_size], strict=True))
    columns = [window[block_size + j : last + j + 1 : block_size] for j in range(lookahead)]
    return list(zip(bases, *columns, strict=True))


def to_event_extra_keys(
    profile: VllmHashProfile, extra_keys: Sequence[ExtraKeys]
) -> tuple[ExtraKeys, ...] | None:
    """The per-block extra keys as vLLM publishes them in ``BlockStored`` events.

    0.33 strips its tags there (bare LoRA name and salt, ``(id, offset)`` pairs,
    bare digests); 0.26 publishes its keys as they are. An empty sequence gives
    None.
    """
    if not extra_keys:
        return None
    if profile.extra_key_style is ExtraKeyStyle.BARE:
        return tuple(extra_keys)
    return tuple(
        None if keys is None else tuple(_untag(key) for key in keys) for keys in extra_keys
    )


def _untag(key: object) -> object:
    if not isinstance(key, tuple) or not key:
        return key
    if key[0] == _MM_TAG:
        return key[1:]
    return key[1]
