"""One BlockStored event recomputed under one guess of the server's hash settings.

What a ``BlockStored`` lets anyone recompute, and what it does not:

1. Block ``j`` of the event covers ``token_ids[j*B:(j+1)*B]`` (``B`` its
   ``block_size``); its hash chains from the previous block's, the first from
   ``parent_block_hash`` (NONE_HASH when that is None).
2. The parent must be known *in full*. With bytes hashes it is in the event.
   With 64-bit ints (vLLM's default) it is only known when this audit
   recomputed that block itself from an earlier event (the full digest whose
   low 64 bits are the int), or when the event starts the request (parent
   None: NONE_HASH, known from the seed). A chain that starts before the
   capture cannot be checked.
3. The extra keys are published per block, as vLLM 0.33 strips its tags:
   they are re-tagged for a 0.33 scheme (LoRA name, ``(mm id, offset)`` pairs,
   cache salt, embeddings digest). 0.33 also hashes the LoRA *path*, which
   events do not carry: it must be given (``lora_paths``).
4. Groups that cache only some blocks (Mamba, sliding window with a block
   mask) publish the hashes of those blocks but the tokens of all of them, so
   the event's hashes must be an ordered subsequence of the recomputed chain.
   The keys of the blocks left out are not published: they are taken as the
   request's keys on every block (its LoRA name, or none). When the chain then
   differs, a salt or an image on a block left out may be why: the event is
   unverifiable, never "disagrees" (unless another setting reproduces it).
6. Lookahead hashes (vLLM 0.33+, EAGLE/MTP servers, L > 0): block ``j``'s keys
   are ``(E, t[e], ..., t[e+L-1])``, the L tokens after it; the event shows them
   in ``lookahead_token_ids`` (one list of L tokens per hash), which also tells L.
5. When the hash block size ``b`` is smaller than ``B`` (it divides it), each
   block's hash is the last of its ``B/b`` fine hashes; the fine blocks' keys
   are known only when the block's keys are None.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kvpure.events.types import BlockStored, ExtraKey
from kvpure.hashing.fast_prompt import fast_hash_token_blocks
from kvpure.hashing.scheme import ExtraKeyStyle, VllmHashProfile

_LOW_64_BITS = (1 << 64) - 1

Keys = tuple[object, ...] | None


class AuditStatus(enum.Enum):
    """The verdict on one BlockStored event."""

    AGREES = "agrees"
    """Recomputing gives the event's hashes."""
    DISAGREES = "disagrees"
    """Recomputing gives other hashes (or the parent is a block that disagreed)."""
    UNVERIFIABLE = "unverifiable"
    """Something that enters the hash is unknown (``reason`` says what)."""


class ParentSource(enum.Enum):
    """Where the full hash of the event's parent came from."""

    ROOT = "root"
    """No parent: the chain starts at NONE_HASH (the seed decides it)."""
    PUBLISHED = "published"
    """The event carries the parent's digest bytes."""
    RECOMPUTED = "recomputed"
    """An earlier event that agreed gave it (its int is the digest's low 64 bits)."""
    UNKNOWN = "unknown"
    """Only the parent's 64-bit int is known."""


@dataclass(frozen=True, slots=True)
class Settings:
    """One guess at the server's hash settings: what the chain is computed with."""

    algorithm: str
    none_hash: bytes | None
    """NONE_HASH, or None where it is random (root blocks cannot be recomputed)."""
    block_size: int
    """The hash block size."""
    profile: VllmHashProfile
    lookahead: int = 0
    """L, the tokens after each block that its hash covers (vLLM's
    ``num_hash_lookahead_tokens``)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """The result of recomputing one event under one :class:`Settings`."""

    status: AuditStatus
    parent: ParentSource
    reason: str = ""
    digests: tuple[bytes, ...] = ()
    """The full hash of every block the event's tokens cover (masked ones included),
    when the event agrees."""
    assumed_keys: bool = False
    """Unverifiable only because the keys of blocks the group left out are unknown:
    another setting that reproduces the event proves the router's setting wrong."""
    parent_digest: bytes | None = None
    """The parent the agreeing chain started from."""
    keys: tuple[Keys, ...] = ()
    """The keys hashed per block, when the event published them all (agreeing events
    with one hash block per block): what a group that leaves blocks out can reuse."""


Learned = Mapping[tuple[bytes, tuple[int, ...]], Keys]
"""Keys hashed for a block, by (its parent's digest, its tokens), from events that
published them and agreed: another group's events of the same request."""


def is_masked(event: BlockStored) -> bool:
    """Whether the event's group left blocks out (its tokens cover more blocks than it
    publishes hashes for)."""
    size = event.block_size
    return size > 0 and len(event.token_ids) // size > len(event.block_hashes)


def _chain_with_learned(
    algorithm: str,
    parent: bytes,
    tokens: Sequence[int],
    size: int,
    keys: Sequence[Keys],
    learned: Learned,
) -> list[bytes]:
    """The chain, block by block, each block's keys taken from ``learned`` where another
    group published them for the same parent and tokens."""
    digests: list[bytes] = []
    for index, fill in enumerate(keys):
        block = tuple(tokens[index * size : (index + 1) * size])
        own = learned.get((parent, block), fill)
        parent = fast_hash_token_blocks(algorithm, parent, block, size, [own])[0]
        digests.append(parent)
    return digests


class _Unverifiable(ValueError):
    pass


def has_lookahead_hashes(profile: VllmHashProfile) -> bool:
    """Whether the release has lookahead hashes (0.33+)."""
    return profile.lookahead_hashes


def low_64_bits(digest: bytes) -> int:
    """vLLM's 64-bit form of a block hash (``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1``)."""
    return int.from_bytes(digest, "big") & _LOW_64_BITS


def _retag(event: BlockStored, keys: ExtraKey, lora_paths: Mapping[str, str]) -> Keys:
    """vLLM 0.33's hashed keys from its published (untagged) ones."""
    items = list(keys)
    tagged: list[object] = []
    if event.lora_name is not None:
        if not items or items[0] != event.lora_name:
            raise _Unverifiable(
                f"the extra keys {tuple(keys)!r} do not start with the LoRA name "
                f"{event.lora_name!r}"
            )
        path = lora_paths.get(event.lora_name)
        if path is None:
            raise _Unverifiable(
                f"vLLM 0.33 hashes the LoRA path, which events do not carry: give the path "
                f"of {event.lora_name!r}"
            )
        tagged.append(("lora", event.lora_name, path))
        items = items[1:]
    for item in items:
        if isinstance(item, tuple) and len(item) == 2:
            tagged.append(("mm", *item))
        elif isinstance(item, bytes):
            tagged.append(("prompt_embeds", item))
        elif isinstance(item, str):
            tagged.append(("cache_salt", item))
        else:
            raise _Unverifiable(f"extra key {item!r} is none of vLLM 0.33's kinds")
    return tuple(tagged)


def _bare(event: BlockStored, keys: ExtraKey) -> Keys:
    return tuple(keys)


def hashed_keys(
    event: BlockStored, profile: VllmHashProfile, lora_paths: Mapping[str, str], blocks: int
) -> tuple[list[Keys], bool]:
    """The extra keys vLLM hashed for each of the ``blocks`` blocks the tokens cover
    (before any lookahead tokens), and whether some were assumed: a group that
    publishes only some blocks (Mamba) publishes only their keys, so the others are
    taken as the request's keys on every block (its LoRA name, or none); a salt or
    an image there would make the recomputed chain differ."""
    published = event.extra_keys
    if published is None:
        raise _Unverifiable("extra_keys is null, so the keys that were hashed are unknown")
    convert = _bare if profile.extra_key_style is ExtraKeyStyle.BARE else None

    def hashed(keys: ExtraKey | None) -> Keys:
        if keys is None:
            return None
        return convert(event, keys) if convert else _retag(event, keys, lora_paths)

    if len(published) == blocks:
        return [hashed(keys) for keys in published], False
    if len(published) != len(event.block_hashes):
        raise _Unverifiable(
            f"{len(published)} extra-key entries for {len(event.block_hashes)} hashes"
        )
    every_block = None if event.lora_name is None else ExtraKey((event.lora_name,))
    if any(keys != every_block for keys in published):
        raise _Unverifiable(
            f"this group publishes the extra keys of {len(published)} of the {blocks} blocks "
            "its tokens cover, and a cache salt or an image on a block it left out is not "
            "in the event"
        )
    return [hashed(every_block)] * blocks, True


def event_lookahead(event: BlockStored) -> int:
    """The server's L as the event shows it: the length of its ``lookahead_token_ids``
    lists (vLLM hashes a block only once its next L tokens exist, so every list has
    L tokens); 0 when they are null."""
    lists = event.lookahead_token_ids
    if not lists:
        return 0
    lengths = {len(tokens) for tokens in lists}
    if len(lengths) > 1:
        raise _Unverifiable(f"lookahead_token_ids lists of different lengths {sorted(lengths)}")
    return lengths.pop()


def _tokens_after(event: BlockStored, blocks: int) -> tuple[int, ...]:
    """``token_ids`` and the tokens the event shows after them (the lookahead tokens
    of its last block); checks that each block's lookahead list is the tokens after it
    where ``token_ids`` has them."""
    lists = event.lookahead_token_ids
    tokens = event.token_ids
    if not lists:
        return tokens
    if len(lists) != len(event.block_hashes):
        raise _Unverifiable(
            f"{len(lists)} lookahead_token_ids lists for {len(event.block_hashes)} hashes"
        )
    if len(lists) == blocks:
        for index, after in enumerate(lists):
            end = (index + 1) * event.block_size
            shown = tokens[end : end + len(after)]
            if tuple(after[: len(shown)]) != shown:
                raise _Unverifiable(
                    f"lookahead_token_ids[{index}] are not the tokens after block {index}"
                )
    return tokens + tuple(lists[-1])


def with_lookahead(
    keys: list[Keys], tokens: Sequence[int], hash_size: int, lookahead: int
) -> list[Keys]:
    """vLLM's keys of a lookahead hash: ``(E, t[e], ..., t[e+L-1])`` per block
    (``get_request_block_hasher``), ``E`` the block's own keys (over [s, e + L))."""
    if not lookahead:
        return keys
    result: list[Keys] = []
    for index, own in enumerate(keys):
        end = (index + 1) * hash_size
        after = tuple(tokens[end : end + lookahead])
        if len(after) < lookahead:
            raise _Unverifiable(
                f"the {lookahead} tokens after block {index} are not in the event "
                "(lookahead_token_ids is null or shorter)"
            )
        result.append((own, *after))
    return result


def _is_subsequence(wanted: Sequence[int | bytes], found: Sequence[int | bytes]) -> bool:
    position = 0
    for value in wanted:
        try:
            position = found.index(value, position) + 1
        except ValueError:
            return False
    return True


def _geometry(event: BlockStored) -> int:
    """The number of blocks ``token_ids`` covers; raises where the event is inconsistent."""
    size = event.block_size
    if size < 1:
        raise _Unverifiable(f"block_size {size} is not a positive number of tokens")
    if len(event.token_ids) % size:
        raise _Unverifiable(
            f"{len(event.token_ids)} token ids are not whole blocks of {size} tokens"
        )
    blocks = len(event.token_ids) // size
    if blocks < len(event.block_hashes):
        raise _Unverifiable(f"{len(event.block_hashes)} hashes but token ids for {blocks} blocks")
    if len({type(h) for h in event.block_hashes}) > 1:
        raise _Unverifiable("the event mixes int and bytes hashes")
    return blocks


def parent_of(
    event: BlockStored, settings: Settings, known: Mapping[int, tuple[bytes, ...]]
) -> tuple[ParentSource, tuple[bytes, ...]]:
    """Where the parent's full hash comes from, and the candidates for it (none: unknown)."""
    parent = event.parent_block_hash
    if parent is None:
        return ParentSource.ROOT, (() if settings.none_hash is None else (settings.none_hash,))
    if isinstance(parent, bytes):
        return ParentSource.PUBLISHED, (parent,)
    found = known.get(parent, ())
    return (ParentSource.RECOMPUTED if found else ParentSource.UNKNOWN), found


def check_event(
    event: BlockStored,
    settings: Settings,
    known: Mapping[int, tuple[bytes, ...]],
    lora_paths: Mapping[str, str],
    learned: Learned | None = None,
) -> Outcome:
    """Recompute ``event`` under ``settings``; ``known`` maps 64-bit ints to the full
    hashes recomputed so far under the same settings, ``learned`` the keys of blocks
    other events published (for the blocks this event's group leaves out)."""
    source, parents = parent_of(event, settings, known)
    assumed = False
    try:
        if not event.block_hashes:
            raise _Unverifiable("the event has no block hashes")
        blocks = _geometry(event)
        size, hash_size = event.block_size, settings.block_size
        if size % hash_size:
            return Outcome(
                AuditStatus.DISAGREES,
                source,
                f"{size}-token blocks cannot be hashed as {hash_size}-token blocks",
            )
        scale = size // hash_size
        keys, assumed = hashed_keys(event, settings.profile, lora_paths, blocks)
        if scale > 1:
            if any(k is not None for k in keys):
                raise _Unverifiable(
                    f"{size}-token blocks with extra keys cannot be split into "
                    f"{hash_size}-token hash blocks"
                )
            keys = [None] * (blocks * scale)
        event_lookahead(event)
        keys = with_lookahead(keys, _tokens_after(event, blocks), hash_size, settings.lookahead)
        if not parents:
            if source is ParentSource.ROOT:
                raise _Unverifiable("NONE_HASH is random (PYTHONHASHSEED unset)")
            raise _Unverifiable("the parent is known only as a 64-bit int")
    except _Unverifiable as why:
        return Outcome(AuditStatus.UNVERIFIABLE, source, str(why))
    as_int = isinstance(event.block_hashes[0], int)
    for parent in parents:
        if assumed and learned:
            fine = _chain_with_learned(
                settings.algorithm, parent, event.token_ids, hash_size, keys, learned
            )
        else:
            fine = fast_hash_token_blocks(
                settings.algorithm, parent, event.token_ids, hash_size, keys
            )
        digests = tuple(fine[scale - 1 :: scale])
        published = [low_64_bits(d) for d in digests] if as_int else digests
        if _is_subsequence(event.block_hashes, published):
            whole = scale == 1 and not assumed
            return Outcome(
                AuditStatus.AGREES,
                source,
                digests=digests,
                parent_digest=parent,
                keys=tuple(keys) if whole else (),
            )
    if assumed:
        return Outcome(
            AuditStatus.UNVERIFIABLE,
            source,
            f"this group publishes {len(event.block_hashes)} of the {blocks} blocks its tokens "
            "cover, and the extra keys of only those: a cache salt or an image on a block "
            "it left out enters the chain but is in no event seen",
            assumed_keys=True,
        )
    return Outcome(AuditStatus.DISAGREES, source, "the recomputed hashes differ")
